// Conv2d instantiation and launch: the kernel's name expression, its tile geometry, grid and arguments.
#include <algorithm>

#include "templates/conv2d/conv2d_detail.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "templates/elementwise/expression.hpp"

namespace jitune::templates::conv2d {
namespace {

using detail::round_up;
std::int64_t vector_of(std::int64_t n) {
  return n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}

}  // namespace

namespace detail {

std::string epilogue_source(const ConvProblem& p) {
  const elementwise::Expression* e = p.epilogue();
  if (!e) return {};
  // The expression engine's functor over its inputs (acc and r in order of first appearance), wrapped in the
  // (acc, r) shape the kernels call (conv2d.cuh's NoEpilogue).
  std::string text = elementwise::op_functor_source(*e);
  text += "struct jitune_conv_epilogue {\n  static constexpr bool kActive = true, kResidual = ";
  text += p.residual() ? "true" : "false";
  text += ";\n  __device__ __forceinline__ float operator()(float acc, float r) const {\n    const float v[] = {";
  for (std::size_t i = 0; i < e->inputs.size(); ++i) text += (i ? ", " : "") + e->inputs[i];
  text += "};\n    (void)r;\n    return jitune_ew_op()(v);\n  }\n};\n";
  return text;
}

KernelSource program(const ConvProblem& p, std::string name, std::string_view entry) {
  if (p.epilogue()) name.insert(name.size() - 1, ", jitune_conv_epilogue");
  return {"#include \"" + std::string(entry) + "\"\n" + epilogue_source(p), std::move(name)};
}

KernelSource source(const ConvProblem& p, const Config& config) {
  if (config.at("algo") == 1) return igemm_source(p, config);
  if (config.at("algo") == 2) return tcd_source(p, config);
  if (config.at("algo") == 6) return stream_source(p, config);
  if (config.at("algo") >= 3) return wino_source(p, config);
  const auto& s = p.shape();
  std::string name = "jitune::conv::conv2d<" + std::string(dtype_cuda_type(p.dtype()));
  for (std::int64_t v : {s.c, s.k, s.r, s.s, s.stride_h, s.stride_w, s.dilation_h, s.dilation_w,
                         config.at("out_h"), config.at("out_w"), config.at("block_h"), config.at("block_w"),
                         config.at("k_block"), config.at("c_stage"), config.at("load"),
                         config.at("double_buffer"), config.at("max_regs"), std::int64_t{s.bias ? 1 : 0}})
    name += ", " + std::to_string(v);
  name += ">";
  return program(p, std::move(name));
}

LaunchShape launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
  if (config.at("algo") == 1) return igemm_launch_shape(p, config, device);
  if (config.at("algo") == 2) return tcd_launch_shape(p, config, device);
  if (config.at("algo") == 6) return stream_launch_shape(p, config, device);
  if (config.at("algo") >= 3) return wino_launch_shape(p, config);
  const TileGeometry g = tile_geometry(p, config);
  const std::int64_t tiles = ((p.p() + g.tile_h - 1) / g.tile_h) * ((p.q() + g.tile_w - 1) / g.tile_w);
  LaunchShape shape;
  shape.grid.x = static_cast<unsigned>(tiles);
  shape.grid.y = static_cast<unsigned>(p.shape().k / config.at("k_block"));
  shape.grid.z = static_cast<unsigned>(std::clamp<std::int64_t>(p.shape().n, 1, 65535));
  shape.block.x = static_cast<unsigned>(g.threads);
  shape.shared_bytes = static_cast<unsigned>(g.shared_bytes);
  return shape;
}

void push_call_args(const ConvProblem& p, const Config& config, const void* x, const void* w,
                    const void* bias, void* y, const void* residual, KernelArgs& args) {
  struct ArgsLayout {  // templates::conv2d::Args<T> in conv2d.cuh
    const void* x;
    const void* w;
    const void* bias;
    void* y;
    const void* residual;
    std::int32_t n, h, w_, p, q, pad_h, pad_w, tiles_x;
  };
  static_assert(sizeof(ArgsLayout) == 72);
  const auto& s = p.shape();
  // tiles_x: output tiles along Q for the direct kernels and Winograd (2 or 4 columns each); the implicit
  // GEMM and the streaming GEMM do not read it.
  const std::int64_t algo = config.at("algo");
  const std::int64_t tile_w = algo == 1 || algo == 6 ? 1
                              : algo == 2            ? config.at("cols")
                              : algo == 3            ? 2
                              : algo >= 4            ? 4
                                                     : config.at("block_w") * config.at("out_w");
  const ArgsLayout a{x,
                     w,
                     bias,
                     y,
                     residual,
                     static_cast<std::int32_t>(s.n),
                     static_cast<std::int32_t>(s.h),
                     static_cast<std::int32_t>(s.w),
                     static_cast<std::int32_t>(p.p()),
                     static_cast<std::int32_t>(p.q()),
                     static_cast<std::int32_t>(s.pad_h),
                     static_cast<std::int32_t>(s.pad_w),
                     static_cast<std::int32_t>((p.q() + tile_w - 1) / tile_w)};
  args.push_raw(&a, sizeof a, alignof(ArgsLayout));
}

}  // namespace detail

TileGeometry tile_geometry(const ConvProblem& problem, const Config& config) {
  const auto& s = problem.shape();
  const std::int64_t oh = config.at("out_h"), ow = config.at("out_w"), bh = config.at("block_h"),
                     bw = config.at("block_w"), kb = config.at("k_block"), cs = config.at("c_stage"),
                     load = config.at("load"), db = config.at("double_buffer");
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(problem.dtype()));
  // Clamped so absurd dilations give a large (rejected) shared-memory size instead of overflowing.
  auto clamp = [](std::int64_t v) { return static_cast<int>(std::min<std::int64_t>(v, 1 << 28)); };
  TileGeometry g;
  g.threads = clamp(bh * bw);
  g.tile_h = clamp(bh * oh);
  g.tile_w = clamp(bw * ow);
  const std::int64_t in_h = (bh * oh - 1) * s.stride_h + (s.r - 1) * s.dilation_h + 1;
  const std::int64_t in_w = (bw * ow - 1) * s.stride_w + (s.s - 1) * s.dilation_w + 1;
  const std::int64_t span = (ow - 1) * s.stride_w + (s.s - 1) * s.dilation_w + 1;
  const std::int64_t span_read = round_up(span, vector_of(ow * s.stride_w));
  const std::int64_t pitch = round_up((bw - 1) * ow * s.stride_w + span_read, 4);
  const std::int64_t in_stage = cs * in_h * pitch, w_stage = cs * s.r * s.s * kb;
  const std::int64_t units = (in_w + 2 * (load - 1)) / load;
  g.in_h = clamp(in_h);
  g.in_w = clamp(in_w);
  g.span_read = clamp(span_read);
  g.pitch = clamp(pitch);
  g.in_stage = clamp(in_stage);
  g.w_stage = clamp(w_stage);
  g.in_per_thread = clamp((cs * in_h * units + bh * bw - 1) / (bh * bw));
  g.w_per_thread = clamp((w_stage + bh * bw - 1) / (bh * bw));
  g.buffers = db ? 2 : 1;
  g.shared_bytes = 4 * g.buffers * (in_stage + w_stage);
  std::int64_t regs = oh * ow * kb + span_read + s.s * kb + 40;
  if (db) regs += g.in_per_thread * ((load * es + 3) / 4) + g.w_per_thread;
  g.register_estimate = clamp(regs);
  return g;
}

void push_args(const ConvProblem& p, const Config& config, const void* x, const void* w, const void* bias,
               void* y, const void* residual, void* workspace, KernelArgs& args) {
  detail::push_call_args(p, config, x, w, bias, y, residual, args);
  const std::int64_t algo = config.at("algo");
  if (algo == 1 || algo == 5) args.push(workspace);
  if (algo == 1 && config.at("repack") == 3) detail::igemm_main_extra_args(p, config, workspace, args);
}

}  // namespace jitune::templates::conv2d
