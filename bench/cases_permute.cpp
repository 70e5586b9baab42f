// Permute bench cases: the 14 public rows of bench-cases.md (7 shapes x float32 / float16), through
// jitune::permute with the tuned and the heuristic-default runtime, verified byte for byte against the CPU
// reference first.
#include "bench/bench_case.hpp"
#include "templates/permute/permute.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

nlohmann::json run_permute(Context& ctx, const std::string& signature) {
  const Family& fam = templates::permute::permute_family();
  auto problem = fam.parse_problem(signature);
  const auto& p = static_cast<const templates::permute::PermuteProblem&>(*problem);
  Workload w = fam.workload(p, ctx.seed);
  auto reference = fam.reference(p, w);
  tuner::DeviceWorkload dw(fam, p, w, reference);
  const void* in = dw.inputs()[0];
  void* out = dw.outputs()[0];
  const std::span<const std::int64_t> shape(p.shape());
  const std::span<const int> perm(p.perm());
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    // Correct first: poisoned output, one call, compared with the CPU reference.
    dw.reset_outputs(stream.get());
    permute(*rt, in, out, shape, perm, p.dtype(), s);
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    std::vector<std::byte> got(dw.output_buffers()[0].bytes());
    JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
    const OutputCheck check = fam.output_check(p, 0);
    const std::uint64_t count = got.size() / dtype_size(check.dtype);
    const CompareResult cmp = compare_host(check, got.data(), reference[0].data(), count);
    const std::string prefix = rt == &ctx.tuned ? "" : "default_";
    row[prefix + "correct"] = cmp.ok();
    if (!cmp.ok()) row[prefix + "error"] = cmp.describe(count, check);
  }
  const bool small = p.bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  auto us =
      time_pair([&] { permute(ctx.tuned, in, out, shape, perm, p.dtype(), s); },
                [&] { permute(ctx.heuristic, in, out, shape, perm, p.dtype(), s); }, small, stream.get());
  finish_row(row, ctx, "permute", p.signature(), p.bytes_moved(), 0, us, small);
  return row;
}

std::vector<Case> permute_cases() {
  std::vector<Case> out;
  for (const auto& [name, signature] : templates::permute::permute_family().default_suite())
    out.push_back({name, "permute", [sig = signature](Context& ctx) { return run_permute(ctx, sig); },
                   signature});
  // Identity permutes (issue 19): no kernel, one cuMemcpyDtoDAsync into the output (bench/peer/permute.py copies
  // too: out.copy_(x), since x.permute(identity).contiguous() is x itself and writes nothing).
  for (const char* dtype : {"float32", "float16"})
    out.push_back({std::string("permute_") + dtype + "_4096x4096_01_identity", "permute",
                   [sig = std::string("dtype=") + dtype + ";perm=0,1;shape=4096x4096"](Context& ctx) {
                     return run_permute(ctx, sig);
                   },
                   std::string("dtype=") + dtype + ";perm=0,1;shape=4096x4096"});
  return out;
}

const Registrar registrar(permute_cases());

}  // namespace
}  // namespace jitune::bench
