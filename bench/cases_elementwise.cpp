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

std::vector<Case> elementwise_cases() {
  std::vector<Case> out;
  for (const auto& [name, signature] : templates::elementwise::elementwise_family().default_suite())
    out.push_back({name, "elementwise", [sig = signature](Context& ctx) { return run_elementwise(ctx, sig, {}); },
                   signature});
  // Misaligned views: (name suffix, element offsets of out, inputs...). bench/peer/elementwise.py has the same.
  const std::vector<std::pair<std::string, std::vector<std::size_t>>> views = {
      {"x+1", {0, 1, 0}}, {"x+2", {0, 2, 0}}, {"x+3", {0, 3, 0}}, {"all+1", {1, 1, 1}}, {"x+1_y+3", {0, 1, 3}}};
  for (const auto& [suffix, offsets] : views)
    for (const char* base : {"mul_float16_134217728", "mul_float32_134217728", "mul_float16_1048576"}) {
      if (suffix != "x+1" && std::string(base) != "mul_float16_134217728") continue;
      const std::string dtype = std::string(base).find("float16") != std::string::npos ? "float16" : "float32";
      const std::string n = std::string(base).substr(std::string(base).rfind('_') + 1);
      const std::string sig = "dtype=" + dtype + ";expr=z = x * y;n=" + n;
      out.push_back({std::string(base) + "_" + suffix, "elementwise",
                     [sig, offs = offsets](Context& ctx) { return run_elementwise(ctx, sig, offs); }, sig});
    }
  out.push_back({"fma_float16_134217728_a+1", "elementwise",
                 [](Context& ctx) {
                   return run_elementwise(ctx, "dtype=float16;expr=out = a * b + c;n=134217728", {0, 1, 0, 0});
                 },
                 "dtype=float16;expr=out = a * b + c;n=134217728"});
  return out;
}

const Registrar registrar(elementwise_cases());

}  // namespace
}  // namespace jitune::bench
