// Conv2d bench cases (bench-cases.md and issue 18): the seed article's case and the small-channel rows, float32
// and float16, then float16 network layers, three of them channels last, and four with fused epilogues (bias +
// ReLU, bias + residual + ReLU), then float32 network layers, exact and with the TF32 opt-in. Each verifies the
// tuned and the heuristic-default runtime against the CPU reference through jitune::conv2d, then times both
// alternately; GFLOP/s are 2 * N * K * P * Q * C * R * S over the time.
#include "bench/bench_case.hpp"
#include "templates/conv2d/conv2d.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

nlohmann::json run_conv2d(Context& ctx, const std::string& signature) {
  const Family& fam = templates::conv2d::conv2d_family();
  auto problem = fam.parse_problem(signature);
  const auto& p = static_cast<const templates::conv2d::ConvProblem&>(*problem);
  const auto& s = p.shape();
  Workload w = fam.workload(p, ctx.seed);
  auto reference = fam.reference(p, w);
  tuner::DeviceWorkload dw(fam, p, w, reference);
  const void* x = dw.inputs()[0];
  const void* wt = dw.inputs()[1];
  const void* bias = s.bias ? dw.inputs()[2] : nullptr;
  void* y = dw.outputs()[0];
  const void* residual = p.residual() ? dw.inputs().back() : nullptr;
  Conv2dParams params;
  params.input = {s.n, s.c, s.h, s.w};
  params.weight = {s.k, s.c, s.r, s.s};
  params.stride = {s.stride_h, s.stride_w};
  params.padding = {s.pad_h, s.pad_w};
  params.dilation = {s.dilation_h, s.dilation_w};
  params.layout = s.layout;
  params.epilogue = s.epilogue;
  params.precision = s.precision;
  driver::StreamHandle stream;
  const auto st = reinterpret_cast<Stream>(stream.get());
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    // Correct first: poisoned output, one call, compared with the CPU reference.
    dw.reset_outputs(stream.get());
    conv2d(*rt, x, wt, bias, residual, y, params, p.dtype(), st);
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    std::vector<std::byte> got(dw.output_buffers()[0].bytes());
    JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
    const OutputCheck check = fam.output_check(p, 0);
    const std::uint64_t count = got.size() / dtype_size(p.dtype());
    const CompareResult cmp = compare_host(check, got.data(), reference[0].data(), count);
    const std::string prefix = rt == &ctx.tuned ? "" : "default_";
    row[prefix + "correct"] = cmp.ok();
    if (!cmp.ok()) row[prefix + "error"] = cmp.describe(count, check);
  }
  const bool small = p.bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  auto us =
      time_pair([&] { conv2d(ctx.tuned, x, wt, bias, residual, y, params, p.dtype(), st); },
                [&] { conv2d(ctx.heuristic, x, wt, bias, residual, y, params, p.dtype(), st); }, small, stream.get());
  finish_row(row, ctx, "conv2d", p.signature(), p.bytes_moved(), p.flops(), us, small);
  return row;
}

std::vector<Case> conv2d_cases() {
  std::vector<Case> out;
  for (const auto& [name, signature] : templates::conv2d::conv2d_family().default_suite())
    out.push_back({name, "conv2d", [sig = signature](Context& ctx) { return run_conv2d(ctx, sig); },
                   signature});
  return out;
}

const Registrar registrar(conv2d_cases());

}  // namespace
}  // namespace jitune::bench
