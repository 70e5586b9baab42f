// Elementwise bench cases: z = x * y (bench-cases.md) and out = a * b + c, float32 and float16.
#include "bench/bench_case.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

nlohmann::json run_elementwise(Context& ctx, const std::string& signature) {
  const Family& fam = templates::elementwise::elementwise_family();
  auto problem = fam.parse_problem(signature);
  const auto& p = static_cast<const templates::elementwise::ElementwiseProblem&>(*problem);
  const std::string& expr = p.expression().canonical;
  Workload w = fam.workload(p, ctx.seed);
  auto reference = fam.reference(p, w);
  tuner::DeviceWorkload dw(fam, p, w, reference);
  std::vector<const void*> ins(dw.inputs().begin(), dw.inputs().end());
  void* out = dw.outputs()[0];
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    // Correct first: poisoned output, one call, compared with the CPU reference.
    dw.reset_outputs(stream.get());
    elementwise(*rt, expr, ins, out, p.n(), p.dtype(), s);
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    std::vector<std::byte> got(dw.output_buffers()[0].bytes());
    JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
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
    out.push_back({name, "elementwise", [sig = signature](Context& ctx) { return run_elementwise(ctx, sig); },
                   signature});
  return out;
}

const Registrar registrar(elementwise_cases());

}  // namespace
}  // namespace jitune::bench
