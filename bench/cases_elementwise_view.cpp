// elementwise_view bench cases (issue 21): the family's default suite, the fused chains a PyTorch user writes (see
// views_family.cpp), each one jitune kernel over views, against eager PyTorch (two or three kernels) and Inductor
// in bench/peer/elementwise_view.py. Each operand is passed as its merged view (the plan's shape and strides).
// Bandwidth counts what the fused kernel must move: the output once, each input's distinct elements once.
#include "bench/bench_case.hpp"
#include "templates/elementwise/views.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {


nlohmann::json run_view(Context& ctx, const std::string& signature) {
  const Family& fam = templates::elementwise::elementwise_view_family();
  auto problem = fam.parse_problem(signature);
  const auto specs = fam.buffers(*problem);
  const std::size_t inputs = specs.size() - 1;
  Workload w = fam.workload(*problem, ctx.seed);
  auto reference = fam.reference(*problem, w);
  tuner::DeviceWorkload dw(fam, *problem, w, reference);
  std::vector<ViewOperand> in;
  for (std::size_t i = 0; i < inputs; ++i) in.push_back({dw.inputs()[i], specs[i].shape, specs[i].strides});
  const ViewOperand out{dw.outputs()[0], specs[inputs].shape, specs[inputs].strides};
  const auto dtype = specs[inputs].dtype;
  const std::string expr(signature.substr(signature.find("expr=") + 5,
                                          signature.find(";layout=") - signature.find("expr=") - 5));
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    dw.reset_outputs(stream.get());  // correct first: poisoned (or initial) output, one call, the CPU reference
    elementwise_view(*rt, expr, in, out, dtype, s);
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    std::vector<std::byte> got(dw.output_buffers()[0].bytes());
    JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
    const OutputCheck check = fam.output_check(*problem, 0);
    const auto count = static_cast<std::uint64_t>(got.size() / dtype_size(dtype));
    const CompareResult cmp = compare_host(check, got.data(), reference[0].data(), count);
    const std::string prefix = rt == &ctx.tuned ? "" : "default_";
    row[prefix + "correct"] = cmp.ok();
    if (!cmp.ok()) row[prefix + "error"] = cmp.describe(count, check);
  }
  const bool small = problem->bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  auto us = time_pair([&] { elementwise_view(ctx.tuned, expr, in, out, dtype, s); },
                      [&] { elementwise_view(ctx.heuristic, expr, in, out, dtype, s); }, small, stream.get());
  finish_row(row, ctx, "elementwise_view", problem->signature(), problem->bytes_moved(), 0, us, small);
  return row;
}

std::vector<Case> view_cases() {
  std::vector<Case> out;
  for (const auto& [name, signature] : templates::elementwise::elementwise_view_family().default_suite())
    out.push_back({name, "elementwise_view", [sig = signature](Context& ctx) { return run_view(ctx, sig); },
                   signature});
  return out;
}

const Registrar registrar(view_cases());

}  // namespace
}  // namespace jitune::bench
