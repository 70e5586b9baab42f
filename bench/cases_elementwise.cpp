// Elementwise bench cases: z = x * y (bench-cases.md) and out = a * b + c, float32 and float16; and the misaligned
// views of issue 19 (an input, or every pointer, a few elements past a 16-byte boundary, as x[1:] makes), served by
// the aligned case's record.
#include "bench/bench_case.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "runtime/driver.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

// A device copy of `bytes` from host data placed `offset` bytes into a buffer with 64 bytes to spare.
struct Placed {
  driver::DeviceBuffer mem;
  void* ptr;
  Placed(const std::vector<std::byte>& host, std::size_t bytes, std::size_t offset)
      : mem(bytes + 64), ptr(static_cast<char*>(mem.data()) + offset) {
    JITUNE_CU_CHECK(cuMemsetD8(mem.get(), 0xFF, mem.bytes()));
    if (!host.empty()) JITUNE_CU_CHECK(cuMemcpyHtoD(mem.get() + offset, host.data(), host.size()));
  }
};

// offsets: elements past the allocation's (256-byte aligned) start, output first then inputs; empty: aligned.
nlohmann::json run_elementwise(Context& ctx, const std::string& signature, const std::vector<std::size_t>& offsets) {
  const Family& fam = templates::elementwise::elementwise_family();
  auto problem = fam.parse_problem(signature);
  const auto& p = static_cast<const templates::elementwise::ElementwiseProblem&>(*problem);
  const std::string& expr = p.expression().canonical;
  Workload w = fam.workload(p, ctx.seed);
  auto reference = fam.reference(p, w);
  const std::size_t es = dtype_size(p.dtype()), bytes = static_cast<std::size_t>(p.n()) * es;
  auto offset = [&](std::size_t i) { return i < offsets.size() ? offsets[i] * es : 0; };
  std::vector<Placed> placed;
  placed.reserve(w.inputs.size() + 1);
  placed.emplace_back(std::vector<std::byte>{}, bytes, offset(0));
  for (std::size_t a = 0; a < w.inputs.size(); ++a) placed.emplace_back(w.inputs[a], bytes, offset(a + 1));
  std::vector<const void*> ins;
  for (std::size_t a = 1; a < placed.size(); ++a) ins.push_back(placed[a].ptr);
  void* out = placed[0].ptr;
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    // Correct first: poisoned output, one call, compared with the CPU reference.
    JITUNE_CU_CHECK(cuMemsetD8Async(placed[0].mem.get(), 0xFF, placed[0].mem.bytes(), stream.get()));
    elementwise(*rt, expr, ins, out, p.n(), p.dtype(), s);
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    std::vector<std::byte> got(bytes);
    JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), reinterpret_cast<CUdeviceptr>(out), got.size()));
    const OutputCheck check = fam.output_check(p, 0);
    const CompareResult cmp = compare_host(check, got.data(), reference[0].data(), static_cast<std::uint64_t>(p.n()));
    const std::string prefix = rt == &ctx.tuned ? "" : "default_";
    row[prefix + "correct"] = cmp.ok();
    if (!cmp.ok()) row[prefix + "error"] = cmp.describe(static_cast<std::uint64_t>(p.n()), check);
  }
  const bool small = p.bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  auto us = time_pair([&] { elementwise(ctx.tuned, expr, ins, out, p.n(), p.dtype(), s); },
                      [&] { elementwise(ctx.heuristic, expr, ins, out, p.n(), p.dtype(), s); }, small, stream.get());
  finish_row(row, ctx, "elementwise", p.signature(), p.bytes_moved(), 0, us, small);
  return row;
}

// Element offsets (output first, then the inputs) a case name's suffix asks for: "_x+1_y+3" puts input x one
// element and y three elements past the allocation's start, "_all+1" every pointer; no suffix, none.
std::vector<std::size_t> view_offsets(const std::string& name, const templates::elementwise::Expression& e) {
  std::vector<std::size_t> offsets(e.inputs.size() + 1, 0);
  std::size_t pos = 0;
  while ((pos = name.find('_', pos)) != std::string::npos) {
    const std::size_t plus = name.find('+', pos);
    const std::size_t end = std::min(name.find('_', pos + 1), name.size());
    if (plus < end) {
      const std::string input = name.substr(pos + 1, plus - pos - 1);
      const auto k = static_cast<std::size_t>(std::stoul(name.substr(plus + 1, end - plus - 1)));
      for (std::size_t i = 0; i < e.inputs.size(); ++i)
        if (input == "all" || e.inputs[i] == input) offsets[i + 1] = k;
      if (input == "all") offsets[0] = k;
    }
    pos = end;
  }
  return offsets;
}

std::vector<Case> elementwise_cases() {
  std::vector<Case> out;
  auto add = [&](const std::string& name, const std::string& signature) {
    const Family& fam = templates::elementwise::elementwise_family();
    const auto problem = fam.parse_problem(signature);
    const auto& p = static_cast<const templates::elementwise::ElementwiseProblem&>(*problem);
    const std::vector<std::size_t> offsets = view_offsets(name, p.expression());
    // The placement must give the classes the signature names (a suite case and its bench row agree).
    const std::size_t es = dtype_size(p.dtype());
    std::vector<std::uint8_t> classes;
    for (std::size_t i = 1; i <= p.expression().inputs.size(); ++i) classes.push_back(alignment_class(
        reinterpret_cast<const void*>(256 + offsets[i] * es), 16));
    classes.push_back(alignment_class(reinterpret_cast<const void*>(256 + offsets[0] * es), 16));
    const templates::elementwise::ElementwiseProblem placed(p.expression(), p.dtype(), p.n(), classes);
    if (placed.signature() != p.signature())
      throw Error("bench case " + name + ": its offsets make " + placed.signature() + ", not " + p.signature());
    out.push_back({name, "elementwise",
                   [signature, offsets](Context& ctx) { return run_elementwise(ctx, signature, offsets); },
                   signature});
  };
  for (const auto& [name, signature] : templates::elementwise::elementwise_family().default_suite())
    add(name, signature);
  // Three elements off is the class of one element off (2 bytes): served by that case's record.
  add("mul_float16_134217728_x+3", "align=2,16,16;dtype=float16;expr=z = x * y;n=134217728");
  // Tiny problems (issue 19): one element, one launch on either side; served by the nearest tuned size.
  add("mul_float32_1", "dtype=float32;expr=z = x * y;n=1");
  add("mul_float16_1", "dtype=float16;expr=z = x * y;n=1");
  return out;
}

const Registrar registrar(elementwise_cases());

}  // namespace
}  // namespace jitune::bench
