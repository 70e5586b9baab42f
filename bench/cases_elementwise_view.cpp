// elementwise_view bench cases (issue 21): the fused chains a PyTorch user writes, each one jitune kernel over
// views, against eager PyTorch (two or three kernels) and Inductor in bench/peer/elementwise_view.py.
//   view_permute_scale_bias: y = x.permute(0, 2, 1) * s + b, x (64, 1024, 1024) float16, s a 0-d tensor, b (1024,)
//   view_bias_add:           y = x + b, x (8192, 1024) float16, b (1024,)
//   view_slice_mul:          y = a[:, 1:] * b, a (8192, 1025) float32 (its rows start at every alignment)
//   view_broadcast3:         y = x * r + c, x (4096, 4096) float16, r (4096,) a row, c (4096, 1) a column
// Each operand is passed as its merged view (the plan's shape and strides), which names the same elements.
// Bandwidth counts what the fused kernel must move: the output once, each input's distinct elements once.
#include "bench/bench_case.hpp"
#include "templates/elementwise/views.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

const std::pair<const char*, const char*> kCases[] = {
    {"view_permute_scale_bias_float16_64x1024x1024",
     "dtype=float16;expr=y = x * s + b;layout=inner_transpose;shape=64,1024,1024;"
     "strides=1048576,1024,1|1048576,1,1024|0,0,0|0,0,1"},
    {"view_bias_add_float16_8192x1024", "dtype=float16;expr=y = x + b;layout=rows;shape=8192,1024;"
                                        "strides=1024,1|1024,1|0,1"},
    {"view_slice_mul_float32_8192x1024", "dtype=float32;expr=y = a * b;layout=rows;shape=8192,1024;"
                                         "strides=1024,1|1025,1|1024,1"},
    {"view_broadcast3_float16_4096x4096", "dtype=float16;expr=y = x * r + c;layout=broadcast_column;"
                                          "shape=4096,4096;strides=4096,1|4096,1|0,1|1,0"},
};

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
  for (const auto& [name, signature] : kCases)
    out.push_back({name, "elementwise_view",
                   [sig = std::string(signature)](Context& ctx) { return run_view(ctx, sig); }, signature});
  return out;
}

const Registrar registrar(view_cases());

}  // namespace
}  // namespace jitune::bench
