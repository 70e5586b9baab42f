// The conv2d family: direct NCHW convolution problems, the tile geometry the kernel uses, and the family
// object.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <jitune/tensor.hpp>

#include "templates/family.hpp"

namespace jitune::templates::elementwise {
struct Expression;
}

namespace jitune::templates::conv2d {

/// One convolution: y[N,K,P,Q] = conv(x[N,C,H,W], w[K,C,R,S]) (+ bias[K]), PyTorch semantics, groups = 1, then
/// optionally an epilogue expression over each output element.
class ConvProblem final : public Problem {
 public:
  /// Sizes and geometry; every field is validated by the constructor.
  struct Shape {
    std::int64_t n = 1, c = 1, h = 1, w = 1;  ///< Input.
    std::int64_t k = 1, r = 1, s = 1;         ///< Output channels, filter height and width.
    std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
    bool bias = false;
    /// kNHWC: x stored {N, H, W, C}, w {K, R, S, C}, y {N, P, Q, K} (the implicit GEMM only).
    ImageLayout layout = ImageLayout::kNCHW;
    /// kTF32: a float32 problem may run on TF32 tensor cores (the implicit GEMM, algo 1) as well as the exact
    /// kernels; the tuner times them all. The constructor resets it to kIeee for float16 / bfloat16.
    Fp32Precision precision = Fp32Precision::kIeee;
    /// Empty, or an elementwise expression ("y = max(acc + r, 0.0f)") over acc, the convolution plus bias as
    /// an unfused conv2d stores it, and r, the element of a residual tensor laid out as y; the constructor keeps
    /// its canonical form.
    std::string epilogue;
  };

  /// Throws InvalidArgument naming the offending value: dtype other than float32/float16/bfloat16, a negative
  /// batch, a non-positive size, stride or dilation, a negative padding, a filter (with dilation) larger than
  /// the padded input, sizes beyond the kernel's 32-bit per-plane indexing, or an epilogue that does not parse,
  /// reads a name other than acc and r, or does not read acc.
  ConvProblem(DType dtype, const Shape& shape);

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  std::int64_t p() const noexcept { return p_; }  ///< Output height.
  std::int64_t q() const noexcept { return q_; }  ///< Output width.
  /// The parsed epilogue, null without one.
  const elementwise::Expression* epilogue() const noexcept { return epilogue_.get(); }
  /// Whether the epilogue reads r (the call then passes a residual buffer shaped like y).
  bool residual() const noexcept { return residual_; }

  /// "bias=0;c=6;dilation_h=1;dilation_w=1;dtype=float32;h=768;k=6;layout=nchw;n=1;pad_h=0;pad_w=0;r=6;s=6;...",
  /// with ";epilogue=<canonical expression>" after dtype when there is one and ";precision=tf32" after pad_w for
  /// a TF32 problem.
  std::string signature() const override;
  /// "float32|nchw|f=6x6|st=1x1|d=1x1": dtype (float32+tf32 for a TF32 problem), layout and filter geometry.
  std::string group() const override;
  /// Whether TF32 tensor cores may run it (a float32 problem of precision kTF32).
  bool tf32() const noexcept { return shape_.precision == Fp32Precision::kTF32; }
  std::vector<double> features() const override;  ///< log2 of N, C, H, W, K.
  double bytes_moved() const override;  ///< x, w, bias (and the residual) read once, y written once.
  double flops() const override;                  ///< 2 * N * K * P * Q * C * R * S.
  /// Products summed per output element: C * R * S.
  std::int64_t terms() const noexcept { return shape_.c * shape_.r * shape_.s; }

 private:
  DType dtype_;
  Shape shape_;
  std::int64_t p_ = 0, q_ = 0;
  std::shared_ptr<const elementwise::Expression> epilogue_;
  bool residual_ = false;
};

/// The kernel's tile geometry for a config, mirrored from conv2d.cuh's Geometry (the host's shared-memory
/// size, register estimate and launch shape use it).
struct TileGeometry {
  int threads = 0, tile_h = 0, tile_w = 0, in_h = 0, in_w = 0, span_read = 0, pitch = 0;
  int in_stage = 0, w_stage = 0;            ///< Floats per input / filter buffer.
  int in_per_thread = 0, w_per_thread = 0;  ///< Prefetch items per thread (double buffering).
  int buffers = 1;
  std::int64_t shared_bytes = 0;
  int register_estimate = 0;  ///< Accumulators + one row's operands + prefetch registers + addressing.
};
TileGeometry tile_geometry(const ConvProblem& problem, const Config& config);

/// Lays out the kernel's templates::conv2d::Args<T> (x, w, bias, y, residual, then n, h, w, p, q, pad_h,
/// pad_w, tiles_x as 32-bit ints), then for the implicit GEMM (algo 1) its workspace pointer (Family::prep;
/// null without split-K), and for repack 3 the addresses of x's, w's and (where staged, else null) y's copies
/// in it.
void push_args(const ConvProblem& problem, const Config& config, const void* x, const void* w,
               const void* bias, void* y, const void* residual, void* workspace, KernelArgs& args);

/// Why the kernel cannot run `config` for `problem` on `device` (vector width, divisibility, threads, tile
/// larger than twice the output, unrolled code size, shared memory, register estimate against the cap), empty
/// if it can. Family::check adds the tuned neighbourhood of the default on top (the configs worth timing).
std::string kernel_limits(const ConvProblem& problem, const Config& config, const DeviceInfo& device);

/// The registered family object.
const Family& conv2d_family();

}  // namespace jitune::templates::conv2d

namespace jitune {
using templates::conv2d::conv2d_family;
}  // namespace jitune
