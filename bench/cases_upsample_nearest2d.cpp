// upsample_nearest2d bench cases: the 12 public upsample 2x rows of bench-cases.md (NCHW) and their NHWC twins,
// forward and backward, float32 and float16, through the public ops; and forwards whose input is a view a few
// elements into its allocation (issue 19: "_src+1"), suite cases of their own alignment class.
#include "bench/bench_case.hpp"
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"
#include "runtime/driver.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

nlohmann::json run_upsample(Context& ctx, const std::string& signature, std::size_t src_offset) {
  const Family& fam = templates::upsample_nearest2d::upsample_nearest2d_family();
  auto problem = fam.parse_problem(signature);
  const auto& p = static_cast<const templates::upsample_nearest2d::UpsampleProblem&>(*problem);
  const UpsampleNearest2d& shape = p.shape();
  Workload w = fam.workload(p, ctx.seed);
  auto reference = fam.reference(p, w);
  w.initial_outputs.clear();  // the op writes every element: poison the output instead of zeroing it
  tuner::DeviceWorkload dw(fam, p, w, reference);
  const void* src = dw.inputs()[0];
  driver::DeviceBuffer shifted;  // the input again, src_offset elements into an allocation of its own
  if (src_offset > 0) shifted = shifted_copy(w.inputs[0], src_offset * dtype_size(p.dtype()), src);
  void* dst = dw.outputs()[0];
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  auto call = [&](Runtime& rt) {
    if (p.backward()) upsample_nearest2d_backward(rt, shape, src, dst, s);
    else upsample_nearest2d(rt, shape, src, dst, s);
  };
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    // Correct first: poisoned output, one call, compared with the CPU reference.
    dw.reset_outputs(stream.get());
    call(*rt);
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    std::vector<std::byte> got(dw.output_buffers()[0].bytes());
    JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
    const OutputCheck check = fam.output_check(p, 0);
    const auto count = static_cast<std::uint64_t>(p.dst_numel());
    const CompareResult cmp = compare_host(check, got.data(), reference[0].data(), count);
    const std::string prefix = rt == &ctx.tuned ? "" : "default_";
    row[prefix + "correct"] = cmp.ok();
    if (!cmp.ok()) row[prefix + "error"] = cmp.describe(count, check);
  }
  const bool small = p.bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  auto us = time_pair([&] { call(ctx.tuned); }, [&] { call(ctx.heuristic); }, small, stream.get());
  finish_row(row, ctx, "upsample_nearest2d", p.signature(), p.bytes_moved(), 0, us, small);
  return row;
}

std::vector<Case> upsample_cases() {
  std::vector<Case> out;
  for (const auto& [name, signature] : templates::upsample_nearest2d::upsample_nearest2d_family().default_suite()) {
    // A "_src+N" case's input starts N elements into its allocation (its signature names that class).
    const auto view = name.rfind("_src+");
    const std::size_t offset = view == std::string::npos ? 0 : std::stoul(name.substr(view + 5));
    out.push_back({name, "upsample_nearest2d",
                   [sig = signature, offset](Context& ctx) { return run_upsample(ctx, sig, offset); }, signature});
  }
  return out;
}

const Registrar registrar(upsample_cases());

}  // namespace
}  // namespace jitune::bench
