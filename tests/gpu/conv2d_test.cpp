// GPU tests of the conv2d family through the runtime API: random shapes (every filter size 1-7, stride 1/2,
// padding 0/1/2, dilation 1/2, N 1/3, bias or not) in float32 / float16 / bfloat16 against the CPU reference
// with poisoned outputs and misaligned pointers; the tensor-core implicit GEMM over random channel counts; outputs smaller than a tile; batches beyond the grid limit;
// the tensor-core direct kernel (algo 2) over both layouts and odd channel counts; Winograd (algo 3) in float32 over
// both layouts, odd channels and sizes, every padding, every knob value and a residual epilogue; Winograd F(4x4)
// (algo 4) likewise, every legal config of random shapes, and served from a stored record; sampled configurations of the
// space through the tuner's verification, every knob value (cp.async stages, split-K and algo 2's tiles included)
// launched directly; TF32 (precision tf32) on the implicit GEMM over both layouts, odd channels, misaligned pointers
// and every knob value; the NCHW 1x1 streaming GEMM (algo 6) over odd C and K, pixel tails, every knob value and
// misaligned calls; the tuned pick; N = 0 and bad input.
#include <jitune/jitune.hpp>
#include <jitune/tuner.hpp>

#include <random>
#include <set>

#include "gpu_util.hpp"
#include "tests/support/conv2d_knob_sample.hpp"
#include "templates/conv2d/conv2d.hpp"
#include "templates/sources.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/measure.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using test::Buffer;
using test::TempDir;

Conv2dParams params_of(const templates::conv2d::ConvProblem::Shape& s) {
  Conv2dParams p;
  p.input = {s.n, s.c, s.h, s.w};
  p.weight = {s.k, s.c, s.r, s.s};
  p.stride = {s.stride_h, s.stride_w};
  p.padding = {s.pad_h, s.pad_w};
  p.dilation = {s.dilation_h, s.dilation_w};
  p.layout = s.layout;
  p.epilogue = s.epilogue;
  p.precision = s.precision;
  return p;
}

// Stride 1-2, padding 0-2 and dilation 1-2 at random, then input sizes from just above the (dilated) filter to
// `extra_h` / `extra_w` more rows / columns (a few tiles).
void random_geometry(std::mt19937_64& rng, templates::conv2d::ConvProblem::Shape& s, std::int64_t extra_h,
                     std::int64_t extra_w) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  s.stride_h = pick(1, 2), s.stride_w = pick(1, 2);
  s.pad_h = pick(0, 2), s.pad_w = pick(0, 2);
  s.dilation_h = pick(1, 2), s.dilation_w = pick(1, 2);
  s.h = std::max<std::int64_t>(1, (s.r - 1) * s.dilation_h + 1 - 2 * s.pad_h) + pick(0, extra_h);
  s.w = std::max<std::int64_t>(1, (s.s - 1) * s.dilation_w + 1 - 2 * s.pad_w) + pick(0, extra_w);
}

// Runs one convolution through jitune::conv2d on the family's random workload, every pointer `offset`
// elements past an aligned address, and compares every output element with the CPU reference; the bytes
// around the output must stay poisoned.
void check_conv(Runtime& rt, DType dtype, const templates::conv2d::ConvProblem::Shape& shape, std::size_t offset,
                std::uint64_t seed) {
  const templates::conv2d::ConvProblem p(dtype, shape);
  const Family& fam = templates::conv2d::conv2d_family();
  const Workload w = fam.workload(p, seed);
  const auto expected = fam.reference(p, w)[0];
  const std::size_t es = dtype_size(dtype), off = offset * es;
  std::vector<std::unique_ptr<Buffer>> in;
  for (const auto& host : w.inputs) {
    in.push_back(std::make_unique<Buffer>(host.size()));
    in.back()->upload(host, off);
  }
  Buffer out(w.output_bytes[0]);
  out.poison();
  conv2d(rt, in[0]->at(off), in[1]->at(off), shape.bias ? in[2]->at(off) : nullptr,
         p.residual() ? in.back()->at(off) : nullptr, out.at(off), params_of(shape), dtype);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  const auto got = out.download(w.output_bytes[0], off);
  const OutputCheck check = fam.output_check(p, 0);
  const std::uint64_t count = w.output_bytes[0] / es;
  const CompareResult r = compare_host(check, got.data(), expected.data(), count);
  INFO(p.signature(), " offset ", offset, " config ", rt.explain("conv2d", p.signature()).config);
  CHECK_MESSAGE(r.ok(), r.describe(count, check));
  for (std::byte b : out.download(off, 0)) REQUIRE(b == std::byte{0xFF});
  const std::size_t end = off + w.output_bytes[0];
  for (std::byte b : out.download(out.bytes - end, end)) REQUIRE(b == std::byte{0xFF});
}

TEST_CASE("conv2d matches the CPU reference over random shapes, strides, paddings and dilations") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937_64 rng(2026);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat32, DType::kBFloat16};
  int cases = 0;
  for (int r = 1; r <= 7; ++r)
    for (int variant = 0; variant < 5; ++variant) {
      templates::conv2d::ConvProblem::Shape s;
      s.r = r;
      s.s = variant == 0 ? r : pick(1, 7);  // square and rectangular filters
      s.n = variant % 2 ? 3 : 1;
      s.c = pick(1, 9);
      s.k = pick(1, 10);
      s.bias = variant >= 3;
      random_geometry(rng, s, 40, 70);
      const DType dtype = dtypes[(r + variant) % 4];
      check_conv(rt, dtype, s, static_cast<std::size_t>(variant == 4 ? pick(1, 3) : 0), 1000 + cases);
      ++cases;
    }
  CHECK(cases == 35);
}

// Launches each of `configs` directly (compiled by the tuner's pool, no dispatch; a config's steps, Family::steps,
// compiled through the runtime and launched before and after it) on the family's workload of `p` and compares the
// output with the CPU reference. Kernels that leave their workspace's zeroed range zero (split-K counters, the
// repacking kernel's barrier) are launched a second time without clearing it, and the range must read zero after
// each launch. Returns the configs run.
std::size_t launch_and_check(Runtime& rt, const templates::conv2d::ConvProblem& p, const std::vector<Config>& configs,
                             CUstream stream) {
  const Family& fam = templates::conv2d::conv2d_family();
  const Workload w = fam.workload(p, 31);
  const auto expected = fam.reference(p, w);
  tuner::DeviceWorkload dw(fam, p, w, expected);
  const OutputCheck check = fam.output_check(p, 0);
  const std::uint64_t count = w.output_bytes[0] / dtype_size(p.dtype());
  tuner::CompilePool pool(internal::impl(rt).compiler, fam, p, configs, rt.device().arch(), 0, false);
  std::size_t ran = 0;
  while (auto batch = pool.next()) {
    REQUIRE(batch->output->ok);
    driver::Module module(batch->output->cubin.data());
    for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
      const Config& config = configs[batch->candidates[b]];
      INFO(p.signature(), " ", config.text());
      CUfunction f = module.function(batch->output->lowered.at(batch->unit[b]));
      LaunchShape shape = fam.launch_shape(p, config, rt.device());
      ready_function(f, shape, rt.device());
      KernelArgs args;
      const LaunchPrep prep = fam.prep(p, config);
      const Bindings bindings = dw.bindings(prep);
      fam.kernel_args(p, config, bindings, args);
      std::vector<StepKernel> steps = fam.steps(p, config, rt.device());
      std::vector<CUfunction> step_functions;
      std::vector<KernelArgs> step_args(steps.size());
      for (std::size_t i = 0; i < steps.size(); ++i) {
        Runtime::Impl& impl = internal::impl(rt);
        step_functions.push_back(impl.load_function("test step " + config.text() + std::to_string(i),
                                                    impl.binary_of(steps[i].source, fam, config), true,
                                                    steps[i].source, fam, config));
        ready_function(step_functions.back(), steps[i].shape, rt.device());
        fam.step_args(p, config, i, bindings, step_args[i]);
      }
      auto launch_steps = [&](bool after) {
        for (std::size_t i = 0; i < steps.size(); ++i)
          if (steps[i].after == after)
            driver::check(launch_kernel(step_functions[i], steps[i].shape, stream, step_args[i].pointers()),
                          "launch_kernel (step)");
      };
      dw.prepare_launch(prep, stream);  // the zeroed range starts at zero
      for (int launch = 0; launch < (prep.rezeroed_by_kernel ? 2 : 1); ++launch) {
        INFO("launch ", launch);
        dw.reset_outputs(stream);
        launch_steps(false);
        driver::check(launch_kernel(f, shape, stream, args.pointers()), "launch_kernel");
        launch_steps(true);
        JITUNE_CU_CHECK(cuStreamSynchronize(stream));
        std::vector<std::byte> got(w.output_bytes[0]);
        JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
        const CompareResult r = compare_host(check, got.data(), expected[0].data(), count);
        CHECK_MESSAGE(r.ok(), r.describe(count, check));
        if (prep.rezeroed_by_kernel) {
          std::vector<std::byte> zeroed(prep.zero_end - prep.zero_begin);
          JITUNE_CU_CHECK(cuMemcpyDtoH(zeroed.data(),
                                       reinterpret_cast<CUdeviceptr>(bindings.workspace) + prep.zero_begin,
                                       zeroed.size()));
          for (std::byte byte : zeroed) REQUIRE(byte == std::byte{0});
        }
      }
      ++ran;
    }
  }
  return ran;
}

TEST_CASE("the tensor-core implicit GEMM (algo 1) matches the CPU reference: odd channels, strides, paddings") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937_64 rng(1804);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  int cases = 0;
  for (int variant = 0; variant < 12; ++variant) {
    templates::conv2d::ConvProblem::Shape s;
    s.r = pick(1, 5);
    s.s = variant % 3 == 0 ? s.r : pick(1, 5);
    s.n = pick(1, 3);
    // Channel counts off every tile and vector width (C * R * S not a multiple of 8) and on them; enough
    // products per output (C * R * S >= 256) and channels (K >= 32) for the default to use tensor cores.
    s.c = variant % 4 == 0 ? 64 : std::max<std::int64_t>(pick(16, 80), (256 + s.r * s.s - 1) / (s.r * s.s));
    s.k = variant % 4 == 0 ? 64 : pick(32, 100);
    s.bias = variant % 2 == 1;
    random_geometry(rng, s, 30, 40);
    const DType dtype = variant % 2 ? DType::kBFloat16 : DType::kFloat16;
    const templates::conv2d::ConvProblem p(dtype, s);
    INFO(p.signature());
    // Tensor cores; the implicit GEMM for long reductions (short ones may take the tensor-core direct kernel).
    const std::int64_t algo = Config::parse(rt.explain("conv2d", p.signature()).config).at("algo");
    CHECK((s.c * s.r * s.s > 288 || s.c > 32 ? algo == 1 : algo != 0));
    // Misaligned pointers (scalar weight loads and output stores) on every third case.
    check_conv(rt, dtype, s, static_cast<std::size_t>(variant % 3 == 2 ? pick(1, 3) : 0), 5000 + cases);
    ++cases;
  }
  CHECK(cases == 12);
}

TEST_CASE("channels last (NHWC) on the implicit GEMM matches the CPU reference: vector and element gathers") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937_64 rng(4242);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  // C a multiple of 8 (16-byte loads of 8 channels per tap) and not (element by element), few and many.
  const std::int64_t channels[] = {8, 64, 3, 37, 16, 24, 5, 48};
  int cases = 0;
  for (std::int64_t c : channels) {
    templates::conv2d::ConvProblem::Shape s;
    s.layout = ImageLayout::kNHWC;
    s.c = c, s.k = pick(1, 70), s.n = pick(1, 3);
    s.r = pick(1, 5), s.s = cases % 2 ? s.r : pick(1, 4);
    s.bias = cases % 3 != 0;
    random_geometry(rng, s, 24, 30);
    const DType dtype = cases % 2 ? DType::kBFloat16 : DType::kFloat16;
    const templates::conv2d::ConvProblem p(dtype, s);
    INFO(p.signature());
    // Tensor cores; the implicit GEMM for long reductions and three channels or fewer.
    const std::int64_t algo = Config::parse(rt.explain("conv2d", p.signature()).config).at("algo");
    CHECK((s.c * s.r * s.s > 288 || s.c < 4 || s.c > 32 ? algo == 1 : algo != 0));
    // Misaligned pointers (element gathers and stores even where C allows vectors) on every third case.
    check_conv(rt, dtype, s, static_cast<std::size_t>(cases % 3 == 2 ? pick(1, 3) : 0), 7000 + cases);
    ++cases;
  }
  CHECK(cases == 8);
  // float32 channels last beyond Winograd's 3x3 of stride 1 has no kernel: a clear error, nothing launched.
  templates::conv2d::ConvProblem::Shape s;
  s.layout = ImageLayout::kNHWC;
  s.c = 8, s.k = 8, s.h = s.w = 8, s.r = s.s = 3, s.stride_h = s.stride_w = 2;
  Buffer x(8 * 8 * 8 * 4), w(8 * 9 * 8 * 4), y(8 * 6 * 6 * 4);
  CHECK_THROWS_WITH_AS(conv2d(rt, x.at(0), w.at(0), nullptr, y.at(0), params_of(s), DType::kFloat32),
                       doctest::Contains("channels last runs on the implicit GEMM"), InvalidArgument);
  // With the TF32 opt-in the implicit GEMM runs it.
  s.precision = Fp32Precision::kTF32;
  s.n = 1;
  check_conv(rt, DType::kFloat32, s, 0, 7100);
}

TEST_CASE("TF32 (precision tf32): float32 on the implicit GEMM matches the CPU reference within TF32's bound") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937_64 rng(2032);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  // Both layouts; channels last with C a multiple of 4 (16-byte taps, the cp.async pipeline) and not (element
  // gathers); NCHW through registers; long reductions so the default takes the tensor cores.
  const std::int64_t channels[] = {64, 37, 48, 20, 96, 30, 128, 45};
  int cases = 0;
  for (std::int64_t c : channels) {
    templates::conv2d::ConvProblem::Shape s;
    s.layout = cases % 2 ? ImageLayout::kNHWC : ImageLayout::kNCHW;
    s.precision = Fp32Precision::kTF32;
    s.c = c, s.n = pick(1, 3);
    s.r = pick(1, 5), s.s = cases % 3 ? s.r : pick(1, 4);
    s.c = std::max<std::int64_t>(s.c, (256 + s.r * s.s - 1) / (s.r * s.s));
    s.k = cases % 4 == 0 ? 64 : pick(32, 100);
    s.bias = cases % 3 != 0;
    random_geometry(rng, s, 24, 30);
    const templates::conv2d::ConvProblem p(DType::kFloat32, s);
    INFO(p.signature());
    CHECK(p.signature().find(";precision=tf32;") != std::string::npos);
    CHECK(Config::parse(rt.explain("conv2d", p.signature()).config).at("algo") == 1);
    // Misaligned pointers (element loads and stores) on every third case.
    check_conv(rt, DType::kFloat32, s, static_cast<std::size_t>(cases % 3 == 2 ? pick(1, 3) : 0), 9100 + cases);
    ++cases;
  }
  CHECK(cases == 8);
  // TF32 must not serve an exact float32 call: the same layer without the opt-in runs an exact kernel and meets
  // float32's tolerance.
  templates::conv2d::ConvProblem::Shape s;
  s.n = 2, s.c = 64, s.h = s.w = 20, s.k = 64, s.r = s.s = 3, s.pad_h = s.pad_w = 1;
  check_conv(rt, DType::kFloat32, s, 0, 9200);
  CHECK(Config::parse(rt.explain("conv2d", templates::conv2d::ConvProblem(DType::kFloat32, s).signature()).config)
            .at("algo") != 1);
  // A layer large enough for the sm_90 default to repack x to channels last (4-channel taps) before wgmma, every
  // pointer misaligned by one element (the copies are aligned whatever x and w are).
  s.n = 16, s.h = s.w = 28, s.precision = Fp32Precision::kTF32, s.bias = true;
  const templates::conv2d::ConvProblem big(DType::kFloat32, s);
  if (rt.device().cc() == 90)
    CHECK(Config::parse(rt.explain("conv2d", big.signature()).config).at("repack") == 1);
  check_conv(rt, DType::kFloat32, s, 1, 9300);
  // Every knob value of the TF32 implicit GEMM, launched directly: NCHW through registers or repacked, channels
  // last with 4-channel taps (C = 40, not a multiple of 8) on the cp.async pipeline (wgmma on sm_90), split-K included (C * R *
  // S = 360: 23 stages of 16, enough for split_k 8).
  driver::StreamHandle stream;
  const Family& fam = templates::conv2d::conv2d_family();
  for (const char* sig :
       {"bias=1;c=40;dilation_h=1;dilation_w=2;dtype=float32;h=29;k=48;layout=nchw;n=2;pad_h=1;pad_w=2;"
        "precision=tf32;r=3;s=3;stride_h=2;stride_w=1;w=45",
        "bias=1;c=40;dilation_h=1;dilation_w=1;dtype=float32;h=23;k=72;layout=nhwc;n=2;pad_h=1;pad_w=1;"
        "precision=tf32;r=3;s=3;stride_h=1;stride_w=2;w=31"}) {
    auto problem = fam.parse_problem(sig);
    const auto& p = static_cast<const templates::conv2d::ConvProblem&>(*problem);
    std::set<std::pair<std::string, std::int64_t>> seen;
    const std::vector<Config> sample = test::conv2d_knob_sample(p, rt.device(), 1, seen);
    INFO(std::string(sig));
    for (std::int64_t v : {2, 4, 8}) CHECK(seen.count({"split_k", v}) == 1);
    for (std::int64_t v : {2, 3, 4}) CHECK(seen.count({"stages", v}) == 1);  // NCHW: repacked first
    if (rt.device().cc() == 90) CHECK(seen.count({"mma", 1}) == 1);
    if (p.shape().layout == ImageLayout::kNCHW) CHECK(seen.count({"repack", 1}) == 1);
    REQUIRE(sample.size() >= 5);
    CHECK(launch_and_check(rt, p, sample, stream.get()) == sample.size());
  }
}

TEST_CASE("the tensor-core direct kernel (algo 2) matches the CPU reference: both layouts, odd channels, strides, paddings, dilations") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937_64 rng(2611);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  int cases = 0;
  for (int variant = 0; variant < 16; ++variant) {
    templates::conv2d::ConvProblem::Shape s;
    s.layout = variant % 2 ? ImageLayout::kNHWC : ImageLayout::kNCHW;
    s.r = pick(1, 5);
    s.s = variant % 3 == 0 ? s.r : pick(1, 5);
    s.n = pick(1, 3);
    // Channel counts on and off the 8-channel chunks (C = 16 and 8 take the cp.async fill channels last), K on
    // and off the 8-channel MMA tiles; C * R * S short enough (<= 288) for the default to take algo 2.
    const std::int64_t channels[] = {16, 4, 8, 13, 6, 24, 5, 16};
    s.c = channels[variant % 8];
    s.k = variant % 4 == 0 ? 16 : pick(1, 40);
    while (s.c * s.r * s.s > 288) s.s > 1 ? --s.s : --s.r;
    s.bias = variant % 3 != 1;
    random_geometry(rng, s, 40, 90);
    const DType dtype = variant % 4 < 2 ? DType::kFloat16 : DType::kBFloat16;
    const templates::conv2d::ConvProblem p(dtype, s);
    INFO(p.signature());
    CHECK(Config::parse(rt.explain("conv2d", p.signature()).config).at("algo") == 2);
    // Misaligned pointers (element fills and stores) on every third case.
    check_conv(rt, dtype, s, static_cast<std::size_t>(variant % 3 == 2 ? pick(1, 3) : 0), 9000 + cases);
    ++cases;
  }
  CHECK(cases == 16);
}

// A float32 3x3 stride-1 shape for the Winograd tests: channels c, outputs k; channels last on odd variants; N 1-3,
// paddings 0-2 per axis, heights and widths from one output pixel up (partial tiles), bias on two variants of three.
templates::conv2d::ConvProblem::Shape winograd_shape(std::mt19937_64& rng, int variant, std::int64_t c, std::int64_t k) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  templates::conv2d::ConvProblem::Shape s;
  s.layout = variant % 2 ? ImageLayout::kNHWC : ImageLayout::kNCHW;
  s.c = c, s.k = k;
  s.n = pick(1, 3), s.r = s.s = 3;
  s.pad_h = pick(0, 2), s.pad_w = pick(0, 2);
  s.h = std::max<std::int64_t>(1, 3 - 2 * s.pad_h) + pick(0, 30);
  s.w = std::max<std::int64_t>(1, 3 - 2 * s.pad_w) + pick(0, 40);
  s.bias = variant % 3 != 1;
  return s;
}

TEST_CASE("Winograd (algo 3) matches the CPU reference: both layouts, odd channels and sizes, every padding, bias, misaligned pointers") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937_64 rng(3303);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  // Channels on and off the 4 / 8 / 16-channel stages and the 16 / 32-channel blocks; heights and widths odd and
  // even (partial 2x2 tiles), from one output pixel up; paddings 0-2 per axis.
  const std::int64_t channels[] = {64, 37, 5, 128, 33, 48, 96, 3};
  const std::int64_t outputs[] = {64, 29, 7, 96, 1, 40, 33, 64};
  int cases = 0;
  for (int variant = 0; variant < 16; ++variant) {
    const templates::conv2d::ConvProblem::Shape s =
        winograd_shape(rng, variant, channels[variant % 8], outputs[(variant + variant / 8) % 8]);
    const templates::conv2d::ConvProblem p(DType::kFloat32, s);
    INFO(p.signature());
    const std::int64_t algo = Config::parse(rt.explain("conv2d", p.signature()).config).at("algo");
    // F(4x4) (algo 4, or 5 in NCHW) where C >= 64 and its blocks cover the SMs (none of these small images, in
    // practice).
    const bool winograd = s.layout == ImageLayout::kNHWC || (s.c >= 32 && s.k >= 32);
    CHECK((winograd ? algo == 3 || (algo >= 4 && s.c >= 64) : algo == 0));
    check_conv(rt, DType::kFloat32, s, static_cast<std::size_t>(variant % 3 == 2 ? pick(1, 3) : 0), 3300 + cases);
    ++cases;
  }
  CHECK(cases == 16);
  // Every knob value launched directly (each config twice on one workspace), both layouts; then the fused epilogue
  // with a residual through the public call, both layouts.
  const Family& fam = templates::conv2d::conv2d_family();
  driver::StreamHandle stream;
  for (const char* sig :
       {"bias=1;c=37;dilation_h=1;dilation_w=1;dtype=float32;h=41;k=29;layout=nchw;n=2;pad_h=1;pad_w=1;r=3;s=3;"
        "stride_h=1;stride_w=1;w=70",
        "bias=0;c=64;dilation_h=1;dilation_w=1;dtype=float32;h=30;k=96;layout=nhwc;n=3;pad_h=2;pad_w=0;r=3;s=3;"
        "stride_h=1;stride_w=1;w=33"}) {
    auto problem = fam.parse_problem(sig);
    const auto& p = static_cast<const templates::conv2d::ConvProblem&>(*problem);
    std::set<std::pair<std::string, std::int64_t>> seen;
    const std::vector<Config> sample = test::conv2d_knob_sample(p, rt.device(), 3, seen);
    for (const Param& param : fam.space().params())
      if (param.when == "algo" && param.varies_under(3))
        for (std::int64_t value : param.values) {
          INFO(param.name, "=", value);
          // K = 29 (the first problem): 64 channels a block would leave more than half of it idle; 8 tiles a block
          // are F(4x4)'s (algo 4); block tiles of 128 the batched GEMMs' (algo 5).
          const bool refused = (p.shape().k == 29 && param.name == "wino_k" && value == 64) ||
                               (param.name == "wino_tiles" && value == 8) ||
                               ((param.name == "wino_k" || param.name == "wino_tiles") && value == 128);
          CHECK(seen.count({param.name, value}) == (refused ? 0u : 1u));
        }
    REQUIRE(sample.size() >= 6);
    CHECK(launch_and_check(rt, p, sample, stream.get()) == sample.size());
  }
  for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    templates::conv2d::ConvProblem::Shape s;
    s.layout = layout;
    s.n = 2, s.c = 64, s.h = 19, s.w = 23, s.k = 48, s.r = s.s = 3, s.pad_h = s.pad_w = 1, s.bias = true;
    s.epilogue = "y = max(acc + r, 0.0f)";
    const templates::conv2d::ConvProblem p(DType::kFloat32, s);
    INFO(p.signature());
    CHECK(Config::parse(rt.explain("conv2d", p.signature()).config).at("algo") == 3);
    check_conv(rt, DType::kFloat32, s, 1, 3399);
  }
}

// Winograd F(4x4) (algo 4, fused, or 5, batched GEMMs in one cooperative launch) against the CPU reference: random
// shapes with channels (64 or more) on and off the stages and blocks, outputs off the 4x4 tiles (from one pixel up),
// paddings 0-2 per axis, bias or not, every legal config of each launched directly (twice on one workspace); the
// knob sample on the host test's two problems; a stored record served exactly through the public call.
void check_winograd4(std::int64_t algo, const std::string& entry, std::uint64_t seed) {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = templates::conv2d::conv2d_family();
  driver::StreamHandle stream;
  std::mt19937_64 rng(seed);
  const std::int64_t channels[] = {64, 69, 128, 100, 77, 96, 130, 64};  // F(4x4) takes C >= 64
  const std::int64_t outputs[] = {64, 29, 7, 16, 1, 40, 33, 32};
  std::size_t launched = 0, shapes = 0;
  for (int variant = 0; variant < 8; ++variant) {
    // The batched GEMMs' blocks of 64 threads or more need K > 32 where the tiles are few: K 33-96 there.
    templates::conv2d::ConvProblem::Shape s =
        winograd_shape(rng, variant, channels[variant], outputs[variant] + (algo == 5 ? 32 : 0));
    if (variant == 5) s.epilogue = "y = max(acc + r, 0.0f)";
    const templates::conv2d::ConvProblem p(DType::kFloat32, s);
    INFO(p.signature());
    std::size_t pruned = 0;
    std::vector<Config> f4;
    for (const Config& c : tuner::legal_candidates(fam, p, rt.device(), pruned))
      if (c.at("algo") == algo) f4.push_back(c);
    // The batched GEMMs' blocks of 128 or 256 threads need more tiles and channels than most of these shapes have
    // for a config worth timing: there, four configs the kernel can run (the knob sample's first).
    if (f4.empty() && algo == 5) {
      std::set<std::pair<std::string, std::int64_t>> seen;
      f4 = test::conv2d_knob_sample(p, rt.device(), algo, seen);
      f4.resize(std::min<std::size_t>(f4.size(), 4));
    }
    REQUIRE(!f4.empty());
    launched += launch_and_check(rt, p, f4, stream.get());
    ++shapes;
  }
  MESSAGE(launched, " algo ", algo, " launches over ", shapes, " random shapes");
  CHECK(shapes == 8);
  // Every knob value the algorithm can run, on the host test's two problems (NCHW off every stage, block and tile;
  // channels last with a residual epilogue).
  // Then one output pixel (a 3x3 image, one tile): the batched GEMMs' padding, all but one tile of a block zeros.
  for (const char* sig :
       {"bias=1;c=69;dilation_h=1;dilation_w=1;dtype=float32;h=41;k=29;layout=nchw;n=2;pad_h=1;pad_w=1;r=3;s=3;"
        "stride_h=1;stride_w=1;w=70",
        "bias=1;c=64;dilation_h=1;dilation_w=1;dtype=float32;h=30;k=96;layout=nhwc;n=3;pad_h=2;pad_w=0;r=3;s=3;"
        "stride_h=1;stride_w=1;w=33;epilogue=y = max(acc + r, 0.0f)",
        "bias=1;c=65;dilation_h=1;dilation_w=1;dtype=float32;h=3;k=70;layout=nchw;n=1;pad_h=0;pad_w=0;r=3;s=3;"
        "stride_h=1;stride_w=1;w=3"}) {
    auto problem = fam.parse_problem(sig);
    const auto& p = static_cast<const templates::conv2d::ConvProblem&>(*problem);
    std::set<std::pair<std::string, std::int64_t>> seen;
    std::vector<Config> sample = test::conv2d_knob_sample(p, rt.device(), algo, seen);
    if (p.shape().h == 3) sample.resize(std::min<std::size_t>(sample.size(), 4));  // one tile: a few configs
    REQUIRE(sample.size() >= (p.shape().h == 3 ? 1u : 4u));
    CHECK(launch_and_check(rt, p, sample, stream.get()) == sample.size());
  }
  // Through the public call from a stored record: its key carries the algorithm's own template hash, and the
  // lookup serves it.
  templates::conv2d::ConvProblem::Shape s;
  s.layout = ImageLayout::kNCHW;
  s.n = 2, s.c = 72, s.h = 23, s.w = 30, s.k = 40, s.r = s.s = 3, s.pad_h = s.pad_w = 1, s.bias = true;
  const templates::conv2d::ConvProblem p(DType::kFloat32, s);
  std::size_t pruned = 0;
  Config chosen;
  for (const Config& c : tuner::legal_candidates(fam, p, rt.device(), pruned))
    if (c.at("algo") == algo) chosen = c;
  REQUIRE(!chosen.empty());
  cache::Record rec;
  rec.key = internal::impl(rt).record_key(fam, p, chosen);
  CHECK(rec.key.template_hash == template_hash(entry));
  rec.group = p.group();
  rec.features = p.features();
  rec.config = chosen.text();
  rec.time_us = 10;
  rec.reps = 1;
  rec.created_at = cache::utc_now();
  internal::impl(rt).user_store->put(rec);
  rt.reload();
  const Explanation x = rt.explain("conv2d", p.signature());
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.config == chosen.text());
  // Three rounds on the runtime's kept workspace: algo 5's barrier counter must be reset by each launch.
  for (std::uint64_t round = 0; round < 3; ++round) check_conv(rt, DType::kFloat32, s, 1, seed + round);
}

TEST_CASE("Winograd F(4x4) (algo 4) matches the CPU reference: both layouts, odd sizes, every padding and knob value, an epilogue, a stored record") {
  check_winograd4(4, "conv2d/winograd4.cuh", 4404);
}

TEST_CASE("Winograd F(4x4) as batched GEMMs (algo 5) matches the CPU reference: both layouts, odd sizes, every padding and knob value, an epilogue, a stored record, repeated launches") {
  check_winograd4(5, "conv2d/winograd4_gemm.cuh", 5505);
}

TEST_CASE("split-K: repeated calls match the reference and reuse one kept workspace, counters reset by the kernel") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  templates::conv2d::ConvProblem::Shape s;
  s.c = 256, s.k = 256, s.h = 14, s.w = 14, s.r = s.s = 3, s.pad_h = s.pad_w = 1, s.bias = true;
  const templates::conv2d::ConvProblem p(DType::kFloat16, s);
  const Config c = Config::parse(rt.explain("conv2d", p.signature()).config);
  REQUIRE(c.at("split_k") > 1);  // 196 pixels x 256 channels: too few tiles for the SMs
  // A stale counter would let a block sum partial tiles that are not all written: every round must still match.
  for (std::uint64_t round = 0; round < 3; ++round) check_conv(rt, DType::kFloat16, s, 0, 40 + round);
  CHECK(internal::impl(rt).scratches.size() == 1);
}

TEST_CASE("repack 1, 2 and 3: NCHW copied to channels last (one cooperative launch, or three) matches the CPU reference") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = templates::conv2d::conv2d_family();
  // Through the public call: on sm_90 the default of a large NCHW problem with C a multiple of 8 repacks. H * W
  // off 8 (element reads of x) and on it (vectors), C off 64 (a partial channel tile), a strided 1x1 filter (a 1x1
  // of stride 1 reads x in place, below); repeated calls (the kernel resets its barrier in the kept workspace) and
  // misaligned pointers.
  struct Case {
    std::int64_t n, c, h, w, k, r, stride, pad;
    DType dtype;
  };
  for (const Case& k : {Case{4, 40, 47, 45, 72, 3, 1, 1, DType::kFloat16}, Case{3, 64, 56, 56, 64, 3, 1, 1,
                                                                                  DType::kBFloat16},
                        Case{20, 264, 30, 30, 96, 1, 2, 0, DType::kFloat16},
                        Case{16, 48, 33, 40, 128, 3, 2, 1, DType::kBFloat16}}) {
    templates::conv2d::ConvProblem::Shape s;
    s.n = k.n, s.c = k.c, s.h = k.h, s.w = k.w, s.k = k.k, s.r = s.s = k.r;
    s.stride_h = s.stride_w = k.stride, s.pad_h = s.pad_w = k.pad, s.bias = k.c != 64;
    const templates::conv2d::ConvProblem p(k.dtype, s);
    INFO(p.signature());
    const Config c = Config::parse(rt.explain("conv2d", p.signature()).config);
    if (rt.device().cc() == 90) CHECK(c.at("repack") >= 1);
    for (std::uint64_t round = 0; round < 3; ++round)
      check_conv(rt, k.dtype, s, round == 2 ? 1 : 0, 60 + round + static_cast<std::uint64_t>(k.c));
  }
  // Launched directly, each twice on one workspace, its counters zero after each, with both copy kernels
  // (repack 1; repack 2's rings of whole rows or of 64-position segments): wgmma and mma.sync tiles (mma.sync
  // off sm_90's tuned neighbourhood, legal there), split-K behind the barrier, 3 to 8 stages; over a problem
  // with partial channel tiles and odd rows (21 x 19: whole rows in two tiles of 24 channels), one whose
  // output tiles span several small images, one strided and dilated with a wide padding, one of more output
  // tiles than resident blocks (each block takes several in turn; 24 x 24 rows in segments of 384 and a tail
  // of 192), a 7x7 image (rows of 49) and a 56x56 one (64 channels x 64-position segments); TF32 with y
  // staged: rows of 49 whose 36 channels leave tiles of 32 rows across images (repack 3), and 15 x 13 images
  // (195 positions: repack 3's copy takes them whole, 8 channels a tile; its unstaging in pieces of 49, the last
  // 48); rows of 100 whose 24 channels leave whole-row tiles of 16 across images and a last of 8, and 16 x 16
  // images (256 positions) under a 9x9 filter (w's rows of 81 taps whole too).
  struct Shape {
    std::int64_t n, c, h, w, k, r, stride, dilation, pad;
    DType dtype = DType::kFloat16;
  };
  std::size_t launched = 0;
  std::size_t twos = 0, threes = 0;
  for (const Shape& k : {Shape{2, 48, 21, 19, 80, 3, 1, 1, 1}, Shape{9, 24, 6, 5, 40, 3, 1, 1, 1},
                         Shape{6, 16, 13, 11, 40, 3, 2, 2, 3}, Shape{96, 16, 24, 24, 48, 3, 1, 1, 1},
                         Shape{8, 64, 7, 7, 96, 3, 1, 1, 1}, Shape{3, 64, 56, 56, 40, 3, 1, 1, 1},
                         Shape{3, 36, 7, 7, 44, 3, 1, 1, 1, DType::kFloat32},
                         Shape{2, 40, 15, 13, 52, 3, 1, 1, 1, DType::kFloat32}, Shape{3, 24, 10, 10, 40, 3, 1, 1, 1},
                         Shape{3, 12, 16, 16, 36, 9, 1, 1, 4, DType::kFloat32}}) {
    templates::conv2d::ConvProblem::Shape s;
    s.n = k.n, s.c = k.c, s.h = k.h, s.w = k.w, s.k = k.k, s.r = s.s = k.r, s.pad_h = s.pad_w = k.pad;
    s.stride_h = s.stride_w = k.stride, s.dilation_h = s.dilation_w = k.dilation, s.bias = true;
    if (k.dtype == DType::kFloat32) s.precision = Fp32Precision::kTF32;
    const templates::conv2d::ConvProblem p(k.dtype, s);
    INFO(p.signature());
    std::vector<Config> configs;
    auto add = [&](std::int64_t mma, std::int64_t tm, std::int64_t tn, std::int64_t wm, std::int64_t wn,
                   std::int64_t stages, std::int64_t split) {
      for (std::int64_t repack : {1, 2, 3}) {
        Config c{{"algo", 1},
                 {"mma", mma},
                 {"tile_m", tm},
                 {"tile_n", tn},
                 {"tile_k", mma && k.dtype != DType::kFloat32 ? 64 : 32},
                 {"warps_m", wm},
                 {"warps_n", wn},
                 {"min_blocks", 1},
                 {"stages", stages},
                 {"split_k", split},
                 {"repack", repack}};
        for (const Param& param : fam.space().params())
          if (!c.find(param.name)) c.set(param.name, param.values.front());
        c = fam.space().canonical(std::move(c));
        INFO(c.text());
        if (mma == 1 && rt.device().cc() != 90) return;
        // Tiles twice as wide as a small problem's channels (or splits without work) are refused there.
        if (templates::conv2d::kernel_limits(p, c, rt.device()).empty())
          configs.push_back(c), twos += repack == 2, threes += repack == 3;
      }
    };
    add(1, 128, 128, 2, 1, 4, 1);
    add(1, 64, 64, 1, 1, 3, 2);
    add(1, 128, 64, 2, 1, 8, 4);
    add(0, 64, 64, 2, 2, 3, 1);
    add(0, 32, 32, 1, 2, 4, 2);
    add(1, 64, 256, 1, 2, 4, 1);
    CHECK(!configs.empty());
    driver::StreamHandle stream;
    CHECK(launch_and_check(rt, p, configs, stream.get()) == configs.size());
    launched += configs.size();
  }
  CHECK(launched >= 16);
  CHECK(twos >= 8);
  CHECK(threes >= 8);
  // repack 3 through the runtime's loader and launch (Runtime::Impl::kernel loads the steps, launch_call runs them
  // around the main kernel), twice on one workspace: y staged (7 x 7) and not (14 x 16).
  if (rt.device().cc() >= 80)
    for (const std::int64_t h : {7, 14}) {
      templates::conv2d::ConvProblem::Shape s;
      s.n = 5, s.c = 64, s.h = h, s.w = h == 7 ? 7 : 16, s.k = 96, s.r = s.s = 3, s.pad_h = s.pad_w = 1, s.bias = true;
      s.epilogue = "y = max(acc, 0.0f)";
      const templates::conv2d::ConvProblem p(DType::kBFloat16, s);
      Config c{{"algo", 1}, {"mma", rt.device().cc() == 90 ? 1 : 0}, {"tile_m", 64}, {"tile_n", 32}, {"tile_k", 32},
               {"warps_m", rt.device().cc() == 90 ? 1 : 2}, {"warps_n", 1}, {"min_blocks", 1}, {"stages", 4},
               {"split_k", 1}, {"repack", 3}};
      if (rt.device().cc() == 90) c.set("tile_k", 64), c.set("tile_n", 64);
      for (const Param& param : fam.space().params())
        if (!c.find(param.name)) c.set(param.name, param.values.front());
      c = fam.space().canonical(std::move(c));
      INFO(p.signature(), " ", c.text());
      REQUIRE(templates::conv2d::kernel_limits(p, c, rt.device()).empty());
      Runtime::Impl& impl = internal::impl(rt);
      const Kernel& kernel = impl.kernel(fam, p, c);
      CHECK(kernel.steps.size() == (h == 7 ? 2u : 1u));
      if (kernel.shape.programmatic) {
        // A grid under the SM count is spread one block an SM (LaunchShape::spread): 8 and 36 blocks here.
        REQUIRE(kernel.shape.grid.volume() <= static_cast<std::uint64_t>(rt.device().sm_count));
        int per_sm = 0;
        JITUNE_CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, kernel.function, static_cast<int>(kernel.shape.block.volume()), kernel.shape.shared_bytes));
        CHECK(per_sm == 1);
      }
      const Workload w = fam.workload(p, 77);
      const auto expected = fam.reference(p, w);
      tuner::DeviceWorkload dw(fam, p, w, expected);
      const OutputCheck check = fam.output_check(p, 0);
      const std::uint64_t count = w.output_bytes[0] / dtype_size(p.dtype());
      const Bindings bindings = dw.bindings(kernel.prep);
      dw.prepare_launch(kernel.prep, nullptr);
      for (int round = 0; round < 2; ++round) {
        dw.reset_outputs(nullptr);
        impl.launch_call(fam, p, kernel, bindings, nullptr);
        JITUNE_CU_CHECK(cuCtxSynchronize());
        std::vector<std::byte> got(w.output_bytes[0]);
        JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
        const CompareResult r = compare_host(check, got.data(), expected[0].data(), count);
        CHECK_MESSAGE(r.ok(), r.describe(count, check));
      }
    }
}

// A 1x1 layer of stride 1 without padding for the NCHW 1x1 tests: sizes, bias, epilogue, dtype.
struct Layer1x1 {
  std::int64_t n, c, h, w, k;
  bool bias;
  const char* epilogue;
  DType dtype;
  templates::conv2d::ConvProblem::Shape shape() const {
    templates::conv2d::ConvProblem::Shape s;
    s.n = n, s.c = c, s.h = h, s.w = w, s.k = k, s.r = s.s = 1, s.bias = bias, s.epilogue = epilogue;
    return s;
  }
};

TEST_CASE("NCHW 1x1 convolutions read x in place as pixel runs (wgmma's pixel-major A) and match the CPU reference") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  if (rt.device().cc() != 90) {
    MESSAGE("skipped: the pixel-major A operand runs on wgmma (sm_90); this device is " << rt.device().arch());
    return;
  }
  const Family& fam = templates::conv2d::conv2d_family();
  // H * W a multiple of 8 (16-byte runs), of 4 (8-byte pieces) and only of 2 (4-byte pieces), so runs of a tile
  // cross images; C off 64 (a partial last stage, zero-filled), K off the tile, pixels off the tile; bias; an
  // epilogue with a residual; both 16-bit types. Persistent blocks (persist 1) too, on a layer of more tiles than
  // resident blocks, so each block stores several tiles while copying the next.
  driver::StreamHandle stream;
  std::size_t launched = 0, persistent = 0;
  for (const Layer1x1& k : {Layer1x1{3, 72, 16, 20, 96, true, "", DType::kFloat16},
                         Layer1x1{5, 64, 14, 14, 64, false, "", DType::kBFloat16},
                         Layer1x1{2, 136, 15, 18, 200, true, "y = max(acc + r, 0.0f)", DType::kFloat16},
                         Layer1x1{7, 256, 7, 8, 72, false, "", DType::kBFloat16},
                         Layer1x1{8, 64, 56, 56, 200, true, "y = max(acc + r, 0.0f)", DType::kFloat16}}) {
    const templates::conv2d::ConvProblem p(k.dtype, k.shape());
    INFO(p.signature());
    std::vector<Config> configs;
    auto add = [&](std::int64_t tm, std::int64_t tn, std::int64_t wm, std::int64_t wn, std::int64_t stages,
                   std::int64_t split, std::int64_t persist = 0) {
      Config c{{"algo", 1},      {"mma", 1},         {"tile_m", tm},       {"tile_n", tn},
               {"tile_k", 64},   {"warps_m", wm},    {"warps_n", wn},      {"min_blocks", 1},
               {"stages", stages}, {"split_k", split}, {"repack", 0},        {"persist", persist}};
      for (const Param& param : fam.space().params())
        if (!c.find(param.name)) c.set(param.name, param.values.front());
      c = fam.space().canonical(std::move(c));
      INFO(c.text());
      // Split-K without a stage for every split is refused on the short reductions.
      if (templates::conv2d::kernel_limits(p, c, rt.device()).empty()) {
        configs.push_back(c);
        persistent += static_cast<std::size_t>(persist);
      }
    };
    add(128, 64, 2, 1, 4, 1);
    add(64, 64, 1, 1, 3, 1);
    add(128, 128, 2, 1, 6, 2);
    add(64, 128, 1, 2, 8, 1);
    add(128, 64, 2, 1, 3, 2);
    add(64, 64, 1, 1, 3, 1, 1);
    add(128, 64, 2, 1, 4, 1, 1);
    add(64, 128, 1, 2, 8, 1, 1);
    REQUIRE(configs.size() >= 3);
    CHECK(launch_and_check(rt, p, configs, stream.get()) == configs.size());
    launched += configs.size();
  }
  CHECK(launched >= 20);
  CHECK(persistent >= 8);
  // Through the public call (14 x 14 images: H * W is not a multiple of 8, so the default is the implicit GEMM,
  // not algo 6): x's alignment class is 4 (28-byte rows), its pointer aligned: still the pipeline (8-byte pieces,
  // Family::variant looks at the pointer); one element off: registers.
  templates::conv2d::ConvProblem::Shape t;
  t.n = 32, t.c = 256, t.h = t.w = 14, t.k = 256, t.r = t.s = 1, t.bias = false;
  const templates::conv2d::ConvProblem q(DType::kFloat16, t);
  CHECK(Config::parse(rt.explain("conv2d", q.signature()).config).at("stages") > 0);
  check_conv(rt, DType::kFloat16, t, 0, 93);
  check_conv(rt, DType::kFloat16, t, 1, 94);
}

TEST_CASE("the NCHW 1x1 streaming GEMM (algo 6) matches the CPU reference: odd C and K, tails, bias, an epilogue, every knob value, misaligned calls") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  if (rt.device().cc() < 80) {
    MESSAGE("skipped: algo 6 runs on mma.sync (sm_80 or newer); this device is " << rt.device().arch());
    return;
  }
  const Family& fam = templates::conv2d::conv2d_family();
  // C a multiple of 8 but not of 16 (a zero-padded k16 step), K off every tile (rows past K), images of fewer pixels
  // than a tile and pixel tails, a layer of more tiles than resident blocks (each block takes several in turn with
  // its ring running ahead), bias, a residual epilogue, both 16-bit types.
  driver::StreamHandle stream;
  std::size_t launched = 0;
  std::set<std::pair<std::string, std::int64_t>> seen;
  for (const Layer1x1& k : {Layer1x1{3, 72, 16, 20, 96, true, "", DType::kFloat16},
                         Layer1x1{2, 24, 15, 16, 40, true, "y = max(acc + r, 0.0f)", DType::kFloat16},
                         Layer1x1{5, 64, 8, 9, 200, false, "", DType::kBFloat16},
                         Layer1x1{1, 8, 2, 4, 8, false, "", DType::kFloat16},
                         Layer1x1{7, 256, 7, 8, 64, false, "", DType::kBFloat16},
                         Layer1x1{8, 64, 56, 56, 256, true, "y = acc * 0.5f + r", DType::kFloat16}}) {
    const templates::conv2d::ConvProblem p(k.dtype, k.shape());
    INFO(p.signature());
    // The tuned neighbourhood's algo 6 candidates (every third), then shapes off it: 16-pixel and 16-channel warp
    // tiles, 256 channels a block, every ring depth, two blocks an SM.
    std::vector<Config> configs;
    std::size_t pruned = 0, i = 0;
    for (const Config& c : tuner::legal_candidates(fam, p, rt.device(), pruned))
      if (c.at("algo") == 6 && i++ % 3 == 0) configs.push_back(c);
    for (auto [tn, tm, wn, wm, stages, mb] :
         {std::array<std::int64_t, 6>{32, 32, 2, 2, 2, 1}, {64, 128, 1, 4, 4, 1}, {256, 64, 4, 1, 3, 1},
          {16, 64, 1, 2, 2, 2}, {128, 32, 2, 1, 4, 2}, {64, 256, 1, 4, 2, 1}, {16, 32, 1, 2, 3, 1},
          {16, 32, 1, 1, 4, 1}}) {
      Config c{{"algo", 6},        {"tile_n", tn}, {"tile_m", tm},     {"warps_n", wn},
               {"warps_m", wm},    {"stages", stages}, {"min_blocks", mb}};
      for (const Param& param : fam.space().params())
        if (!c.find(param.name)) c.set(param.name, param.values.front());
      c = fam.space().canonical(std::move(c));
      if (templates::conv2d::kernel_limits(p, c, rt.device()).empty()) configs.push_back(c);
    }
    REQUIRE(configs.size() >= 2);
    for (const Config& c : configs)
      for (const char* name : {"tile_n", "tile_m", "warps_n", "warps_m", "stages", "min_blocks"})
        seen.insert({name, c.at(name)});
    CHECK(launch_and_check(rt, p, configs, stream.get()) == configs.size());
    launched += configs.size();
  }
  CHECK(launched >= 40);
  for (auto [name, value] : {std::pair<const char*, std::int64_t>{"tile_n", 16}, {"tile_n", 256}, {"tile_m", 32},
                             {"tile_m", 256}, {"stages", 2}, {"stages", 3}, {"stages", 4}, {"min_blocks", 2},
                             {"warps_n", 4}, {"warps_m", 4}}) {
    INFO(name, "=", value);
    CHECK(seen.count({name, value}) == 1);
  }
  // Through the public call: the default of a large 1x1 is algo 6; x, w, y and the residual one element off 16
  // bytes run the implicit GEMM through registers instead (Family::variant), still correct; so does a 14 x 14 image.
  templates::conv2d::ConvProblem::Shape s;
  s.n = 8, s.c = 128, s.h = 28, s.w = 28, s.k = 256, s.r = s.s = 1, s.bias = true;
  const templates::conv2d::ConvProblem p(DType::kFloat16, s);
  CHECK(Config::parse(rt.explain("conv2d", p.signature()).config).at("algo") == 6);
  check_conv(rt, DType::kFloat16, s, 0, 91);
  check_conv(rt, DType::kFloat16, s, 1, 92);
  s.epilogue = "y = max(acc + r, 0.0f)";
  check_conv(rt, DType::kBFloat16, s, 0, 95);
  check_conv(rt, DType::kBFloat16, s, 3, 96);
}

TEST_CASE("fused epilogues match the CPU reference on every algo and store path; a residual may be misaligned") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = templates::conv2d::conv2d_family();
  driver::StreamHandle stream;
  const char* const epilogues[] = {"y = max(acc + r, 0.0f)", "y = acc > 0 ? acc : 0.1f * acc",
                                   "out = acc * 0.5f - r"};
  int e = 0;
  for (const char* sig :
       {"bias=1;c=24;dilation_h=1;dilation_w=2;dtype=float32;h=41;k=20;layout=nchw;n=2;pad_h=1;pad_w=2;r=3;"
        "s=2;stride_h=2;stride_w=1;w=37",
        "bias=0;c=48;dilation_h=1;dilation_w=1;dtype=float16;h=37;k=72;layout=nchw;n=1;pad_h=1;pad_w=1;r=3;"
        "s=3;stride_h=1;stride_w=1;w=64",
        "bias=1;c=37;dilation_h=2;dilation_w=1;dtype=bfloat16;h=29;k=70;layout=nchw;n=3;pad_h=2;pad_w=0;r=3;"
        "s=2;stride_h=2;stride_w=1;w=33",
        "bias=1;c=5;dilation_h=1;dilation_w=1;dtype=float16;h=40;k=37;layout=nchw;n=2;pad_h=1;pad_w=1;r=3;"
        "s=2;stride_h=1;stride_w=1;w=70",
        "bias=1;c=64;dilation_h=1;dilation_w=2;dtype=bfloat16;h=23;k=40;layout=nhwc;n=2;pad_h=2;pad_w=1;r=3;"
        "s=3;stride_h=2;stride_w=1;w=31",
        "bias=1;c=16;dilation_h=1;dilation_w=1;dtype=float16;h=30;k=24;layout=nhwc;n=2;pad_h=1;pad_w=1;r=3;"
        "s=3;stride_h=1;stride_w=1;w=26"}) {
    for (int round = 0; round < 2; ++round, ++e) {
      auto parsed = fam.parse_problem(sig);
      const auto& base = static_cast<const templates::conv2d::ConvProblem&>(*parsed);
      templates::conv2d::ConvProblem::Shape s = base.shape();
      s.epilogue = epilogues[e % 3];
      const templates::conv2d::ConvProblem p(base.dtype(), s);
      // One config per store path the space has here (algo; mma; register / cp.async stages; repack; split-K).
      std::vector<Config> all = fam.space().enumerate(), sample;
      std::set<std::vector<std::int64_t>> paths;
      for (std::size_t i = 0; i < all.size(); i += 7)
        if (templates::conv2d::kernel_limits(p, all[i], rt.device()).empty()) {
          const Config& c = all[i];
          const std::int64_t a = c.at("algo");
          if (paths.insert({a, a == 1 ? c.at("mma") : 0, a == 1 ? c.at("stages") > 0 : 0,
                            a == 1 ? c.at("repack") : 0, a == 1 ? c.at("split_k") > 1 : 0})
                  .second)
            sample.push_back(c);
        }
      INFO(p.signature());
      REQUIRE(sample.size() >= (p.dtype() == DType::kFloat32 ? 1u : 2u));  // float32: the direct kernel only
      CHECK(launch_and_check(rt, p, sample, stream.get()) == sample.size());
      check_conv(rt, p.dtype(), s, static_cast<std::size_t>(round), 400 + static_cast<std::uint64_t>(e));
    }
  }
  // The residual alone misaligned: the epilogue reads it element by element where its vectors would not be.
  templates::conv2d::ConvProblem::Shape s;
  s.n = 2, s.c = 32, s.h = 20, s.w = 24, s.k = 64, s.r = 3, s.s = 3, s.pad_h = s.pad_w = 1, s.bias = true;
  s.epilogue = "y = max(acc + r, 0.0f)";
  const templates::conv2d::ConvProblem p(DType::kFloat16, s);
  const Workload w = fam.workload(p, 5);
  const auto expected = fam.reference(p, w)[0];
  std::vector<std::unique_ptr<Buffer>> in;
  for (const auto& host : w.inputs) {
    in.push_back(std::make_unique<Buffer>(host.size()));
    in.back()->upload(host, &host == &w.inputs.back() ? 2 : 0);
  }
  Buffer out(w.output_bytes[0]);
  out.poison();
  conv2d(rt, in[0]->at(0), in[1]->at(0), in[2]->at(0), in[3]->at(2), out.at(0), params_of(s), DType::kFloat16);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  const OutputCheck check = fam.output_check(p, 0);
  const CompareResult r = compare_host(check, out.download(w.output_bytes[0], 0).data(), expected.data(),
                                       w.output_bytes[0] / 2);
  CHECK_MESSAGE(r.ok(), r.describe(w.output_bytes[0] / 2, check));
  // The residual left out while the epilogue reads r: a clear error.
  CHECK_THROWS_WITH_AS(conv2d(rt, in[0]->at(0), in[1]->at(0), in[2]->at(0), out.at(0), params_of(s), DType::kFloat16),
                       doctest::Contains("residual"), InvalidArgument);
}

TEST_CASE("the public cases' geometries are correct in float32 and float16") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  // Reduced sizes (the reference runs on the CPU) with the public cases' channels and filters.
  struct Row {
    std::int64_t n, c, h, w, k, r;
  };
  for (const Row& row : {Row{1, 6, 96, 64, 6, 6}, Row{2, 3, 40, 45, 16, 3}, Row{1, 16, 64, 64, 16, 3},
                         Row{3, 4, 33, 31, 8, 5}, Row{1, 64, 56, 56, 64, 3}})
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      templates::conv2d::ConvProblem::Shape s;
      s.n = row.n, s.c = row.c, s.h = row.h, s.w = row.w, s.k = row.k, s.r = s.s = row.r;
      check_conv(rt, dtype, s, 0, static_cast<std::uint64_t>(row.c * 100 + row.r));
    }
}

TEST_CASE("outputs smaller than a tile, 1x1 outputs and single rows") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  templates::conv2d::ConvProblem::Shape s;
  s.c = 3, s.k = 5, s.r = 3, s.s = 3;
  for (auto [h, w] : {std::pair{3, 3}, {3, 200}, {150, 3}, {4, 5}, {1 + 2, 1 + 2}}) {
    s.h = h, s.w = w;
    check_conv(rt, DType::kFloat32, s, 0, static_cast<std::uint64_t>(h * 1000 + w));
    check_conv(rt, DType::kFloat16, s, 1, static_cast<std::uint64_t>(h * 1000 + w + 1));
  }
  s.h = 1, s.w = 1, s.pad_h = 1, s.pad_w = 1;  // one input pixel, every tap but the centre in the padding
  check_conv(rt, DType::kFloat32, s, 0, 5);
}

TEST_CASE("a batch beyond the grid's z limit loops over images") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  templates::conv2d::ConvProblem::Shape s;
  s.n = 70001, s.c = 2, s.h = 3, s.w = 4, s.k = 3, s.r = 2, s.s = 3, s.bias = true;
  check_conv(rt, DType::kFloat32, s, 0, 9);
}

TEST_CASE("sampled configurations of the space all verify (tuner verification path)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = templates::conv2d::conv2d_family();
  for (const char* sig :
       {"bias=1;c=4;dilation_h=2;dilation_w=1;dtype=float32;h=37;k=6;layout=nchw;n=2;pad_h=2;pad_w=1;r=3;s=5;"
        "stride_h=1;stride_w=2;w=61",
        "bias=0;c=8;dilation_h=1;dilation_w=1;dtype=float16;h=45;k=8;layout=nchw;n=1;pad_h=1;pad_w=1;r=3;s=3;"
        "stride_h=1;stride_w=1;w=64",
        "bias=0;c=6;dilation_h=1;dilation_w=2;dtype=float32;h=50;k=12;layout=nchw;n=1;pad_h=0;pad_w=0;r=7;s=2;"
        "stride_h=2;stride_w=1;w=48",
        // Channels last with 16 channels: the tensor-core direct kernel's cp.async fill among the candidates.
        "bias=0;c=16;dilation_h=1;dilation_w=2;dtype=bfloat16;h=33;k=16;layout=nhwc;n=1;pad_h=1;pad_w=2;r=3;"
        "s=3;stride_h=2;stride_w=1;w=70"}) {
    auto problem = fam.parse_problem(sig);
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kRandom;
    opt.budget = 40;
    opt.seed = 11;
    opt.min_time_ms = 0.05;
    opt.min_reps = 3;
    opt.store = false;
    opt.cut_ratio = 1e9;  // time every candidate: all must verify
    tuner::TuneReport r = tuner::tune(rt, fam, *problem, opt);
    std::size_t ok = 0;
    for (const auto& c : r.candidates) {
      INFO(sig, " ", c.config.text(), " ", c.reason);
      CHECK(
          (c.status == "ok" || c.status == "resources_exceeded"));  // spilling candidates are rejected unrun
      ok += c.status == "ok";
    }
    CHECK(ok >= 10);
    CHECK(r.best_us > 0);
  }
}

TEST_CASE("configs off the tuned neighbourhood, together using every knob value, verify too") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = templates::conv2d::conv2d_family();
  driver::StreamHandle stream;
  for (const char* sig :
       {"bias=1;c=24;dilation_h=1;dilation_w=2;dtype=float32;h=41;k=48;layout=nchw;n=2;pad_h=1;pad_w=2;r=3;"
        "s=2;stride_h=2;stride_w=1;w=72",
        "bias=0;c=48;dilation_h=1;dilation_w=1;dtype=float16;h=37;k=48;layout=nchw;n=1;pad_h=1;pad_w=1;r=3;"
        "s=3;stride_h=1;stride_w=1;w=64",
        "bias=1;c=37;dilation_h=2;dilation_w=1;dtype=bfloat16;h=29;k=70;layout=nchw;n=3;pad_h=2;pad_w=0;r=3;"
        "s=2;stride_h=2;stride_w=1;w=33",
        // Three channels on the tensor-core direct kernel (an odd chunk count: the zero chunk), dilated.
        "bias=1;c=3;dilation_h=2;dilation_w=2;dtype=float16;h=50;k=8;layout=nchw;n=1;pad_h=0;pad_w=3;r=5;"
        "s=5;stride_h=1;stride_w=2;w=90",
        // Every knob of the tensor-core direct kernel (K = 37: every n_block; one padded chunk a pixel).
        "bias=1;c=5;dilation_h=1;dilation_w=1;dtype=float16;h=40;k=37;layout=nchw;n=2;pad_h=1;pad_w=1;r=3;"
        "s=2;stride_h=1;stride_w=1;w=70",
        // Channels last with C a multiple of 8: the cp.async stages, and every split_k (C * R * S = 576).
        "bias=1;c=64;dilation_h=1;dilation_w=2;dtype=bfloat16;h=23;k=40;layout=nhwc;n=2;pad_h=2;pad_w=1;r=3;"
        "s=3;stride_h=2;stride_w=1;w=31"}) {
    auto problem = fam.parse_problem(sig);
    const auto& p = static_cast<const templates::conv2d::ConvProblem&>(*problem);
    // Every value of every knob in some config the kernel can run, scattered over the space.
    std::set<std::pair<std::string, std::int64_t>> seen;
    const std::vector<Config> sample = test::conv2d_knob_sample(p, rt.device(), -1, seen);
    // wgmma (mma 1) on sm_90: through registers (NCHW) and the cp.async pipeline (channels last), wherever its
    // 64-channel tiles and 64-element stages are not mostly idle.
    const auto& sh = p.shape();
    if (rt.device().cc() == 90 && p.dtype() != DType::kFloat32 && sh.k > 32 && sh.c * sh.r * sh.s > 32)
      CHECK(seen.count({"mma", 1}) == 1);
    // repack 1 wherever an NCHW x has C a multiple of 8 (float16 / bfloat16).
    if (sh.layout == ImageLayout::kNCHW && p.dtype() != DType::kFloat32 && sh.c % 8 == 0)
      CHECK(seen.count({"repack", 1}) == 1);
    if (p.shape().layout == ImageLayout::kNHWC) {  // only the implicit GEMM's knobs vary
      for (std::int64_t v : {2, 3, 4}) CHECK(seen.count({"stages", v}) == 1);
      for (std::int64_t v : {2, 4, 8}) CHECK(seen.count({"split_k", v}) == 1);
      REQUIRE(sample.size() >= 5);
    } else {
      REQUIRE(sample.size() >= 10);
    }
    CHECK(launch_and_check(rt, p, sample, stream.get()) == sample.size());
  }
}

TEST_CASE("the tuned pick is used exactly by a new Runtime, and warm calls skip NVRTC") {
  TempDir dir;
  templates::conv2d::ConvProblem::Shape s;
  s.n = 2, s.c = 5, s.h = 48, s.w = 40, s.k = 4, s.r = 3, s.s = 3, s.pad_h = s.pad_w = 1;
  const std::string sig = conv2d_signature(params_of(s), DType::kFloat16, false);
  std::string tuned;
  {
    Runtime rt(test::isolated_options(dir));
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kRandom;
    opt.budget = 12;
    opt.min_time_ms = 0.2;
    tuner::TuneReport r =
        tuner::tune(rt, templates::conv2d::conv2d_family(), *templates::conv2d::conv2d_family().parse_problem(sig), opt);
    CHECK(r.stored);
    CHECK(r.default_us > 0);
    tuned = r.best.text();
  }
  Runtime rt(test::isolated_options(dir));
  Explanation x = rt.explain("conv2d", sig);
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.config == tuned);
  check_conv(rt, DType::kFloat16, s, 0, 21);
  CHECK(internal::impl(rt).compiler.compile_count() == 0);  // the winner's binary came from the disk cache
  check_conv(rt, DType::kFloat16, s, 0, 22);
  CHECK(internal::impl(rt).compiler.compile_count() == 0);
}

TEST_CASE("launches go on the caller's stream") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  driver::StreamHandle stream;
  templates::conv2d::ConvProblem::Shape s;
  s.c = 2, s.h = 20, s.w = 20, s.k = 2, s.r = 1, s.s = 1;
  const templates::conv2d::ConvProblem p(DType::kFloat32, s);
  const Workload w = templates::conv2d::conv2d_family().workload(p, 4);
  const auto expected = templates::conv2d::conv2d_family().reference(p, w)[0];
  Buffer x(w.inputs[0].size()), wt(w.inputs[1].size()), y(w.output_bytes[0]);
  x.upload(w.inputs[0], 0);
  wt.upload(w.inputs[1], 0);
  y.poison();
  conv2d(rt, x.at(0), wt.at(0), nullptr, y.at(0), params_of(s), DType::kFloat32,
         reinterpret_cast<Stream>(stream.get()));
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  const auto got = y.download(w.output_bytes[0], 0);
  const CompareResult r = compare_host(templates::conv2d::conv2d_family().output_check(p, 0), got.data(), expected.data(),
                                       w.output_bytes[0] / 4);
  CHECK(r.ok());
}

TEST_CASE("N = 0 launches nothing and still validates the call") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer b(1024);
  b.poison();
  Conv2dParams p;
  p.input = {0, 3, 8, 8};
  p.weight = {4, 3, 3, 3};
  conv2d(rt, b.at(0), b.at(0), nullptr, b.at(0), p, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  for (std::byte x : b.download(1024, 0)) CHECK(x == std::byte{0xFF});
  p.weight = {4, 2, 3, 3};
  CHECK_THROWS_AS(conv2d(rt, b.at(0), b.at(0), nullptr, b.at(0), p, DType::kFloat32), InvalidArgument);
}

TEST_CASE("bad input is a clear error") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer b(1 << 16);
  Conv2dParams p;
  p.input = {1, 3, 8, 8};
  p.weight = {4, 3, 3, 3};
  auto message = [&](const Conv2dParams& q, const void* x, const void* w, void* y,
                     DType dtype) -> std::string {
    try {
      conv2d(rt, x, w, nullptr, y, q, dtype);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no exception";
  };
  SUBCASE("channel mismatch between x and w names both shapes") {
    Conv2dParams q = p;
    q.weight[1] = 4;
    const std::string m = message(q, b.at(0), b.at(0), b.at(4096), DType::kFloat32);
    CHECK(m.find("x has 3 channels") != std::string::npos);
    CHECK(m.find("{4, 4, 3, 3}") != std::string::npos);
  }
  SUBCASE("filter larger than the padded input") {
    Conv2dParams q = p;
    q.weight = {4, 3, 5, 5};
    q.dilation = {2, 2};  // spans 9 > 8
    CHECK(message(q, b.at(0), b.at(0), b.at(4096), DType::kFloat32).find("padded input is only 8 x 8") !=
          std::string::npos);
    q.padding = {1, 1};  // 9 <= 10: legal
    CHECK(message(q, b.at(0), b.at(0), b.at(4096), DType::kFloat32) == "no exception");
  }
  SUBCASE("null and misaligned pointers, bad geometry, unsupported dtype") {
    CHECK(message(p, nullptr, b.at(0), b.at(4096), DType::kFloat32).find("x pointer is null") !=
          std::string::npos);
    CHECK(message(p, b.at(0), b.at(2), b.at(4096), DType::kFloat32).find("w pointer is not aligned") !=
          std::string::npos);
    CHECK(message(p, b.at(0), b.at(0), b.at(4097), DType::kFloat16).find("y pointer is not aligned") !=
          std::string::npos);
    Conv2dParams q = p;
    q.stride = {0, 1};
    CHECK(message(q, b.at(0), b.at(0), b.at(4096), DType::kFloat32).find("stride_h = 0") !=
          std::string::npos);
    q = p;
    q.padding = {-1, 0};
    CHECK(message(q, b.at(0), b.at(0), b.at(4096), DType::kFloat32).find("negative") != std::string::npos);
    CHECK(message(p, b.at(0), b.at(0), b.at(4096), DType::kInt32).find("not supported") != std::string::npos);
  }
  CHECK(conv2d_output_shape(p) == std::array<std::int64_t, 4>{1, 4, 6, 6});
}

}  // namespace
}  // namespace jitune
