// The conv2d family object: its space and the Family contract, each part delegated to the file that does it.
#include <cmath>

#include "templates/conv2d/conv2d_detail.hpp"

namespace jitune::templates::conv2d {
namespace {

class ConvFamily final : public Family {
 public:
  ConvFamily()
      : space_({
            {"algo",
             {0, 1, 2, 3, 4, 5, 6},
             "0: direct kernel (FFMA on shared-memory tiles, any dtype); 1: implicit GEMM on tensor cores "
             "(mma.sync on sm_80+ or wgmma on sm_90, float16 / bfloat16, or float32 on TF32 tensor cores "
             "where the "
             "problem's precision is tf32); 2: direct on tensor cores (a shared halo tile read by "
             "ldmatrix, short reductions, float16 / bfloat16, sm_80+); 3: Winograd F(2x2, 3x3) in float32 "
             "(3x3, "
             "stride 1, dilation 1, either layout); 4: Winograd F(4x4, 3x3), as 3 with 4x4 output tiles "
             "(2.25x "
             "fewer products than 3, about four times its rounding error); 5: Winograd F(4x4, 3x3) as 4, in "
             "one "
             "cooperative launch of three passes: transforms into a workspace, the 36 products as batched "
             "GEMMs of "
             "block tiles up to 128 x 128, the output transform; 6: an NCHW 1x1 convolution of stride 1 "
             "without padding "
             "(float16 / bfloat16, sm_80+) as a streaming GEMM on mma.sync: persistent blocks keep w in "
             "shared "
             "memory, copy tiles of pixels by cp.async and store 16-byte runs of pixels"},
            {"out_h", {1, 2, 4}, "direct: output rows per thread", "algo", {0}},
            {"out_w", {1, 2, 4}, "direct: contiguous output columns per thread", "algo", {0}},
            {"block_h",
             {1, 2, 4, 8, 16},
             "direct: thread rows per block (tile height = block_h * out_h)",
             "algo",
             {0}},
            {"block_w",
             {8, 16, 32},
             "direct: thread columns per block (tile width = block_w * out_w)",
             "algo",
             {0}},
            {"k_block",
             {1, 2, 3, 4, 6, 8, 12, 16},
             "direct: output channels per block, all accumulated by each thread; divides K",
             "algo",
             {0}},
            {"c_stage",
             {1, 2, 3, 4, 8},
             "direct: input channels per shared-memory stage; divides C",
             "algo",
             {0}},
            {"load",
             {1, 2, 4, 8},
             "direct: elements per global vector load of the input tile; load * element size <= 16",
             "algo",
             {0}},
            {"double_buffer",
             {0, 1},
             "direct: 1: load the next stage into registers while computing this one",
             "algo",
             {0}},
            {"max_regs",
             {128, 168, 255},
             "direct: register cap per thread (blocks per SM); 255: none; cap * threads <= 65536",
             "algo",
             {0}},
            {"tile_m",
             {32, 64, 128, 256},
             "implicit and streaming GEMM: output pixels per block",
             "algo",
             {1, 6}},
            {"tile_n",
             {16, 32, 64, 128, 256},
             "implicit and streaming GEMM: output channels per block (256: algo 6 "
             "only)",
             "algo",
             {1, 6}},
            {"tile_k",
             {16, 32, 64},
             "implicit GEMM: reduction (C * R * S) elements per shared-memory stage",
             "algo",
             {1}},
            {"warps_m",
             {1, 2, 4},
             "implicit and streaming GEMM: warps along the pixels (warp tile tile_m / warps_m)",
             "algo",
             {1, 6}},
            {"warps_n",
             {1, 2, 4},
             "implicit and streaming GEMM: warps along the channels (warp tile tile_n / "
             "warps_n)",
             "algo",
             {1, 6}},
            {"min_blocks",
             {1, 2},
             "implicit and streaming GEMM: blocks per SM the register allocation must allow (2: at most "
             "32768 / "
             "threads registers)",
             "algo",
             {1, 6}},
            {"mma",
             {0, 1},
             "implicit GEMM: 0: mma.sync, each warp a warp tile; 1: wgmma (sm_90), each of warps_m x warps_n "
             "warpgroups a 64 x (tile_n / warps_n) tile with channels in 64s, 128-byte rows (tile_k 64, TF32 "
             "32)",
             "algo",
             {1}},
            {"split_k",
             {1, 2, 4, 8},
             "implicit GEMM: blocks sharing each output tile's reduction (a float workspace; the last block "
             "sums "
             "the partials in order)",
             "algo",
             {1}},
            {"stages",
             {0, 2, 3, 4, 6, 8},
             "implicit GEMM: 0: stages fed through registers (double buffer, any layout); 2-8: a cp.async "
             "pipeline "
             "of that many shared buffers (C a multiple of 8, TF32 4: channels last, repack 1, or an NCHW "
             "1x1 "
             "convolution of stride 1 without padding on wgmma, its pixels copied in runs; 16-bit only); "
             "streaming "
             "GEMM: 2-4 tiles of pixels in the ring",
             "algo",
             {1, 6}},
            {"repack",
             {0, 1, 2, 3},
             "implicit GEMM, NCHW: 1: one cooperative launch copies x and w to channels last in the "
             "workspace, "
             "then (after a grid barrier) runs the cp.async pipeline over the copies, writing y in NCHW; 2: "
             "the "
             "same with the copies as rings of 16-byte cp.async tiles (igemm_repack.cuh; x and w 16-byte "
             "aligned); "
             "3: repack 2's copies as a kernel of their own before the GEMM and its unstaging of y as one "
             "after it, "
             "up to three launches a call (igemm_launches.cuh; aligned as 2)",
             "algo",
             {1}},
            {"persist",
             {0, 1},
             "implicit GEMM, NCHW 1x1 read as pixel runs: 1: one balanced wave of blocks, each taking output "
             "tiles "
             "in turn with its cp.async pipeline copying the next tile while it stores the last (split_k 1)",
             "algo",
             {1}},
            {"rows", {1, 2, 4, 8, 16, 32}, "tensor-core direct: output rows per block", "algo", {2}},
            {"cols", {16, 32, 64, 128}, "tensor-core direct: output columns per block", "algo", {2}},
            {"n_block",
             {8, 16, 32, 64},
             "tensor-core direct: output channels per block (8 or a multiple of 16)",
             "algo",
             {2}},
            {"warps", {2, 4, 8}, "tensor-core direct: warps per block", "algo", {2}},
            {"m_tiles",
             {1, 2, 4},
             "tensor-core direct: 16-pixel groups a warp computes at once",
             "algo",
             {2}},
            {"wino_k",
             {16, 32, 64, 128},
             "Winograd: output channels per block (algo 5: of a GEMM block tile); "
             "128 for algo 5 only",
             "algo",
             {3, 4, 5}},
            {"wino_tiles",
             {16, 32, 64, 8, 128},
             "Winograd: output tiles (2x2 for algo 3, 4x4 for 4 and 5) per block; 8 "
             "for algo 4 and 5, 128 for algo 5 only",
             "algo",
             {3, 4, 5}},
            {"wino_c", {4, 8, 16}, "Winograd: input channels per shared-memory stage", "algo", {3, 4, 5}},
            {"wino_rk", {4, 8}, "Winograd: output channels per thread (of wino_k)", "algo", {3, 4, 5}},
            {"wino_rt",
             {4, 8},
             "Winograd: tiles per thread (of wino_tiles); threads 16 (algo 3), 36 (algo 4) or 1 "
             "(algo 5) * wino_k / wino_rk * wino_tiles / wino_rt",
             "algo",
             {3, 4, 5}},
            {"wino_min_blocks",
             {1, 2},
             "Winograd: blocks per SM the register allocation must allow",
             "algo",
             {3, 4, 5}},
        }) {}

  std::string_view name() const override { return "conv2d"; }
  std::string_view template_name() const override { return "conv2d/conv2d.cuh"; }
  std::vector<std::string_view> templates() const override {
    return {template_name(),         detail::kWinograd4Template, detail::kWinogradGemmTemplate,
            detail::kStreamTemplate, detail::kRepackTemplate,    detail::kLaunchesTemplate};
  }
  std::string_view template_of(const Config& config) const override {
    const std::int64_t algo = config.at("algo");
    return algo == 4                               ? detail::kWinograd4Template
           : algo == 5                             ? detail::kWinogradGemmTemplate
           : algo == 6                             ? detail::kStreamTemplate
           : algo == 1 && config.at("repack") == 2 ? detail::kRepackTemplate
           : algo == 1 && config.at("repack") == 3 ? detail::kLaunchesTemplate
                                                   : template_name();
  }
  const Space& space() const override { return space_; }
  // About 0.6 s of NVRTC per candidate on an H100 host, mostly the NVVM optimizer on the unrolled body.
  bool slow_compiles() const override { return true; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"dtype", "float32, float16 or bfloat16"},
            {"n", "batch (default 1)"},
            {"c", "input channels"},
            {"h", "input height"},
            {"w", "input width"},
            {"k", "output channels"},
            {"r", "filter height"},
            {"s", "filter width (default r)"},
            {"stride", "stride, both axes (default 1)"},
            {"stride_h", "vertical stride"},
            {"stride_w", "horizontal stride"},
            {"padding", "zero padding, both axes (default 0)"},
            {"pad_h", "vertical zero padding"},
            {"pad_w", "horizontal zero padding"},
            {"dilation", "dilation, both axes (default 1)"},
            {"dilation_h", "vertical dilation"},
            {"dilation_w", "horizontal dilation"},
            {"bias", "1: add a bias per output channel (default 0)"},
            {"layout", "nchw (default) or nhwc: x {N,H,W,C}, w {K,R,S,C}, y {N,P,Q,K} (float16 / bfloat16)"},
            {"epilogue",
             "expression applied to each output before it is stored, over acc (the convolution plus bias) and r "
             "(a residual shaped like y), e.g. 'y = max(acc + r, 0.0f)' (default: none)"},
            {"precision",
             "float32: ieee (default, exact products) or tf32 (TF32 tensor cores allowed: each input truncated to 10 "
             "mantissa bits, sums in float)"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    return detail::make_problem(options);
  }

  Config heuristic(const Problem& problem, const DeviceInfo& device) const override {
    return detail::heuristic(static_cast<const ConvProblem&>(problem), device);
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    return detail::check(static_cast<const ConvProblem&>(problem), config, device);
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    return detail::source(static_cast<const ConvProblem&>(problem), config);
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    return detail::launch_shape(static_cast<const ConvProblem&>(problem), config, device);
  }

  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    return detail::problem_from_call(args);
  }

  // x, w, bias (optional: an empty spec when the call has none), y, and the epilogue's residual r (optional, laid
  // out as y), as stored in the problem's layout.
  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    const auto& s = p.shape();
    const bool nhwc = s.layout == ImageLayout::kNHWC;  // stored shapes, channels innermost
    const std::vector<std::int64_t> y = nhwc ? std::vector<std::int64_t>{s.n, p.p(), p.q(), s.k}
                                             : std::vector<std::int64_t>{s.n, s.k, p.p(), p.q()};
    return {{"x", BufferRole::kIn, p.dtype(), nhwc ? std::vector<std::int64_t>{s.n, s.h, s.w, s.c}
                                                   : std::vector<std::int64_t>{s.n, s.c, s.h, s.w}, {}},
            {"w", BufferRole::kIn, p.dtype(), nhwc ? std::vector<std::int64_t>{s.k, s.r, s.s, s.c}
                                                   : std::vector<std::int64_t>{s.k, s.c, s.r, s.s}, {}},
            {"bias", BufferRole::kIn, p.dtype(), {s.bias ? s.k : 0}, {}, true},
            {"y", BufferRole::kOut, p.dtype(), y, {}},
            {"residual", BufferRole::kIn, p.dtype(), p.residual() ? y : std::vector<std::int64_t>{0}, {}, true}};
  }

  // Implicit GEMM: split-K's zeroed arrival counters, one per output tile, then a float partial tile per block;
  // repack 1 puts its barrier counter first and its copies of x and w after; the kernel resets the counters, so a
  // workspace kept for a stream needs no clearing again.
  LaunchPrep prep(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    if (config.at("algo") == 6) return {};  // the streaming GEMM needs no workspace
    return config.at("algo") == 5 ? detail::wgemm_prep(p, config) : detail::igemm_prep(p, config);
  }

  // Slot 1: a cp.async pipeline (stages > 0) over x and w in place, tuned on 16-byte aligned tensors, called with
  // x or w less aligned, runs the register-staged kernel of the same tiles (it reads any alignment). repack 1
  // reads any alignment into its aligned copies; repack 2 copies (and unstages y in) 16-byte chunks, so with x, w or y
  // less aligned slot 1 is repack 1 of the same tiles. An NCHW x read as pixel runs needs only its pointer
  // aligned: the kernel sizes its copies by H * W, so a 14 x 14 image's 28-byte rows (alignment class 4) do not
  // matter there. The streaming GEMM (algo 6) copies x and w and stores y (and reads the residual) in 16-byte runs:
  // with any of them less aligned, slot 1 is the implicit GEMM through registers (stream_fallback).
  int variant(const Problem& problem, const Config& tuned, const Bindings& b) const override {
    auto aligned = [](const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; };
    if (tuned.at("algo") == 6) {
      const bool residual = static_cast<const ConvProblem&>(problem).residual();
      return aligned(b.pointers[0]) && b.alignment[1] >= 16 && aligned(b.at(3)) && (!residual || aligned(b.pointers[4]))
                 ? 0
                 : 1;
    }
    if (tuned.at("algo") == 1 && tuned.at("repack") >= 2)
      return aligned(b.pointers[0]) && aligned(b.pointers[1]) && aligned(b.at(3)) ? 0 : 1;
    if (tuned.at("algo") != 1 || tuned.at("stages") == 0 || tuned.at("repack") == 1) return 0;
    const bool pixel_runs = static_cast<const ConvProblem&>(problem).shape().layout == ImageLayout::kNCHW;
    const bool x_aligned = pixel_runs ? aligned(b.pointers[0]) : b.alignment[0] >= 16;
    return x_aligned && b.alignment[1] >= 16 ? 0 : 1;
  }

  Config variant_config(const Problem& problem, const Config& tuned, int slot, const DeviceInfo& device) const override {
    if (slot == 1 && tuned.at("algo") == 6)
      return detail::stream_fallback(static_cast<const ConvProblem&>(problem), device);
    Config c = tuned;
    if (slot == 1 && tuned.at("algo") == 1 && tuned.at("repack") >= 2) {
      c.set("repack", 1);
      return c;
    }
    if (slot == 1) {
      c.set("stages", 0);
      c.set("persist", 0);  // persistent blocks run only the cp.async pipeline
    }
    return c;
  }

  std::vector<StepKernel> steps(const Problem& problem, const Config& config,
                                const DeviceInfo& device) const override {
    return detail::igemm_steps(static_cast<const ConvProblem&>(problem), config, device);
  }

  void step_args(const Problem& problem, const Config& config, std::size_t index, const Bindings& b,
                 KernelArgs& args) const override {
    detail::igemm_step_args(static_cast<const ConvProblem&>(problem), config, index, b, args);
  }

  Shortcut shortcut(const Problem& problem) const override {
    if (static_cast<const ConvProblem&>(problem).shape().n == 0) return {Shortcut::Kind::kNothing};
    return {};
  }

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b,
                   KernelArgs& args) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    push_args(p, config, b.pointers[0], b.pointers[1], p.shape().bias ? b.pointers[2] : nullptr, b.at(3),
              p.residual() ? b.pointers[4] : nullptr, b.workspace, args);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    return detail::workload(static_cast<const ConvProblem&>(problem), seed);
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& work) const override {
    return detail::reference(static_cast<const ConvProblem&>(problem), work);
  }

  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    // Float accumulation of C*R*S products of magnitude < 16: the absolute error grows with the term count,
    // so near-zero sums (cancellation) need an absolute tolerance; any indexing error is orders of magnitude
    // larger.
    double atol = 4e-6 * static_cast<double>(p.terms() + (p.shape().bias ? 1 : 0));
    // An epilogue sees acc rounded to the dtype on both sides; where the float and the double sums round to
    // neighbouring values, its output differs by one unit of acc's magnitude even where it cancels acc (y = acc +
    // r near 0). Sums of `terms` products of standard deviation < 6 stay within 36 * sqrt(terms) (six sigma);
    // expressions that scale acc up are beyond this bound.
    const double rtol = p.dtype() == DType::kFloat16 ? 1e-3 : p.dtype() == DType::kBFloat16 ? 8e-3 : 1e-5;
    if (p.epilogue()) atol += rtol * 36.0 * std::sqrt(static_cast<double>(p.terms()));
    // TF32 truncates each input toward zero to 10 mantissa bits: a product's relative error is below 2^-9, the
    // errors' signs follow the products' (random), and the workload's products have an rms of about 3.6, so the
    // sum's error has a standard deviation near 2^-10 * 4 * sqrt(C * R * S); eight of them.
    if (p.tf32()) atol += std::ldexp(1.0, -10) * 32.0 * std::sqrt(static_cast<double>(p.terms()));
    switch (p.dtype()) {
      case DType::kFloat16:
        return {DType::kFloat16, rtol, atol + 1e-4};  // one half ulp is 2^-10 relative
      case DType::kBFloat16:
        return {DType::kBFloat16, rtol, atol + 1e-3};  // one bf16 ulp is 2^-7 relative
      default:
        return {DType::kFloat32, rtol, atol};
    }
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    struct Row {
      int n, c, h, w, k, r, stride, pad;
      bool nhwc = false;
    };
    auto name_of = [](const char* dtype, const Row& r, bool tf32 = false) {
      // Appended piece by piece: GCC 12's -Wrestrict misreads `"S" + std::to_string(...)` (a false positive).
      std::string name = std::string("conv_") + dtype + "_N" + std::to_string(r.n) + "C" + std::to_string(r.c) + "H" +
                         std::to_string(r.h) + "W" + std::to_string(r.w) + "K" + std::to_string(r.k) + "R" +
                         std::to_string(r.r);
      if (r.stride > 1) name += 'S' + std::to_string(r.stride);
      if (r.pad > 0) name += 'P' + std::to_string(r.pad);
      if (r.nhwc) name += "_nhwc";
      if (tf32) name += "_tf32";
      return name;
    };
    auto signature_of = [](const char* dtype, const Row& r, const char* epilogue = nullptr, bool tf32 = false) {
      ConvProblem::Shape s;
      s.n = r.n, s.c = r.c, s.h = r.h, s.w = r.w, s.k = r.k, s.r = r.r, s.s = r.r;
      s.stride_h = s.stride_w = r.stride, s.pad_h = s.pad_w = r.pad;
      s.layout = r.nhwc ? ImageLayout::kNHWC : ImageLayout::kNCHW;
      if (epilogue) s.bias = true, s.epilogue = epilogue;
      if (tf32) s.precision = Fp32Precision::kTF32;
      return ConvProblem(parse_dtype(dtype), s).signature();
    };
    // The seed article's case and the small-channel rows, float32 and float16 (no padding, stride 1).
    static constexpr Row small[] = {{1, 6, 768, 512, 6, 6, 1, 0},
                                    {8, 3, 224, 224, 16, 3, 1, 0},
                                    {1, 16, 512, 512, 16, 3, 1, 0},
                                    {32, 4, 128, 128, 8, 5, 1, 0},
                                    {1, 64, 56, 56, 64, 3, 1, 0}};
    // Issue 18, float16 on tensor cores: ResNet-50 body layers (3x3 at batch 1 and 32, the strided 3x3, 1x1
    // reductions and an expansion) and a UNet 3x3, then three of them channels last.
    static constexpr Row networks[] = {{1, 64, 56, 56, 64, 3, 1, 1},    {32, 64, 56, 56, 64, 3, 1, 1},
                                       {32, 128, 28, 28, 128, 3, 1, 1}, {32, 256, 14, 14, 256, 3, 1, 1},
                                       {32, 512, 7, 7, 512, 3, 1, 1},   {1, 256, 14, 14, 256, 3, 1, 1},
                                       {32, 256, 56, 56, 64, 1, 1, 0},  {32, 128, 56, 56, 128, 3, 2, 1},
                                       {1, 320, 64, 64, 320, 3, 1, 1},
                                       {32, 64, 56, 56, 256, 1, 1, 0},  {32, 1024, 14, 14, 256, 1, 1, 0},
                                       // Channels last (torch.channels_last models, AMP).
                                       {32, 64, 56, 56, 64, 3, 1, 1, true},  {32, 256, 14, 14, 256, 3, 1, 1, true},
                                       {1, 320, 64, 64, 320, 3, 1, 1, true}};
    std::vector<std::pair<std::string, std::string>> cases;
    for (const char* dtype : {"float32", "float16"})
      for (const Row& r : small) cases.emplace_back(name_of(dtype, r), signature_of(dtype, r));
    for (const Row& r : networks) cases.emplace_back(name_of("float16", r), signature_of("float16", r));
    // Issue 18 item 4, fused epilogues (a ResNet block's conv + bias + ReLU, and + residual + ReLU), with bias.
    static constexpr struct {
      Row row;
      const char* suffix;
      const char* epilogue;
    } fused[] = {{{32, 64, 56, 56, 64, 3, 1, 1}, "_bias_relu", "y = max(acc, 0.0f)"},
                 {{32, 64, 56, 56, 64, 3, 1, 1}, "_bias_add_relu", "y = max(acc + r, 0.0f)"},
                 {{32, 64, 56, 56, 64, 3, 1, 1, true}, "_bias_add_relu", "y = max(acc + r, 0.0f)"},
                 {{1, 64, 56, 56, 64, 3, 1, 1}, "_bias_add_relu", "y = max(acc + r, 0.0f)"}};
    for (const auto& f : fused)
      cases.emplace_back(name_of("float16", f.row) + f.suffix, signature_of("float16", f.row, f.epilogue));
    // Issue 18 item 3, float32 without tensor cores (Winograd beside the direct kernel): the ResNet 3x3 layers of
    // stride 1 above and the first channels-last one.
    static constexpr Row float32_rows[] = {{1, 64, 56, 56, 64, 3, 1, 1},     {32, 64, 56, 56, 64, 3, 1, 1},
                                           {32, 128, 28, 28, 128, 3, 1, 1},  {32, 256, 14, 14, 256, 3, 1, 1},
                                           {32, 512, 7, 7, 512, 3, 1, 1},    {1, 256, 14, 14, 256, 3, 1, 1},
                                           {32, 64, 56, 56, 64, 3, 1, 1, true}};
    for (const Row& r : float32_rows) cases.emplace_back(name_of("float32", r), signature_of("float32", r));
    // The same layers where the caller opts in to TF32 tensor cores (beside cuDNN with TF32 on).
    for (const Row& r : float32_rows)
      cases.emplace_back(name_of("float32", r, true), signature_of("float32", r, nullptr, true));
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

const Family& conv2d_family() {
  static const ConvFamily family;
  return family;
}

}  // namespace jitune::templates::conv2d
