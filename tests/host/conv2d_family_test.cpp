// The conv2d family without a GPU: problem validation and output sizes, signatures, constraints and pruning,
// heuristic legality over many shapes, workload, the CPU reference against a naive loop, and NVRTC compiles
// of the space for sm_80 and sm_90.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <set>
#include <string_view>

#include <jitune/ops/conv2d.hpp>

#include "runtime/compiler.hpp"
#include "templates/conv2d/conv2d.hpp"
#include "templates/conv2d/conv2d_detail.hpp"
#include "templates/host_float.hpp"
#include "templates/sources.hpp"
#include "tests/support/conv2d_knob_sample.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

const Family& fam() {
  return templates::conv2d::conv2d_family();
}

std::unique_ptr<Problem> problem(const std::map<std::string, std::string>& options) {
  return fam().make_problem(options);
}

// `c` with the space's other parameters at their first values (algo 0: the direct kernel).
Config with_fronts(Config c) {
  for (const Param& param : fam().space().params())
    if (!c.find(param.name)) c.set(param.name, param.values.front());
  return c;
}

const templates::conv2d::ConvProblem& as_conv(const Problem& p) {
  return static_cast<const templates::conv2d::ConvProblem&>(p);
}

// A config within the kernel's limits whose kernel NVRTC builds for `dev` without spilling; returns its name.
std::string require_compiles(Compiler& compiler, const Problem& q, const Config& c, const DeviceInfo& dev) {
  REQUIRE(templates::conv2d::kernel_limits(as_conv(q), c, dev).empty());
  const KernelSource src = fam().source(q, c);
  const CompiledProgram out = compiler.compile(src.program, {src.name_expression}, dev.arch(), true);
  INFO(out.log);
  REQUIRE(out.ok);
  CHECK_FALSE(out.resources.at(0).spills());
  return src.name_expression;
}

// y[n][k][oy][ox] by the definition, one output at a time (independent of the family's loop order).
double naive(const templates::conv2d::ConvProblem& p, const std::vector<std::byte>& x, const std::vector<std::byte>& w,
             const std::vector<std::byte>* bias, std::int64_t n, std::int64_t k, std::int64_t oy,
             std::int64_t ox) {
  const auto& s = p.shape();
  double sum = bias ? load_element(p.dtype(), bias->data(), static_cast<std::uint64_t>(k)) : 0.0;
  for (std::int64_t c = 0; c < s.c; ++c)
    for (std::int64_t r = 0; r < s.r; ++r)
      for (std::int64_t t = 0; t < s.s; ++t) {
        const std::int64_t iy = oy * s.stride_h - s.pad_h + r * s.dilation_h;
        const std::int64_t ix = ox * s.stride_w - s.pad_w + t * s.dilation_w;
        if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
        sum += load_element(p.dtype(), x.data(),
                            static_cast<std::uint64_t>(((n * s.c + c) * s.h + iy) * s.w + ix)) *
               load_element(p.dtype(), w.data(),
                            static_cast<std::uint64_t>(((k * s.c + c) * s.r + r) * s.s + t));
      }
  return sum;
}

}  // namespace

TEST_CASE("conv2d is registered and its template is embedded") {
  CHECK(&family("conv2d") == &fam());
  CHECK(template_source("conv2d/conv2d.cuh").find("__global__") != std::string::npos);
  CHECK(template_hash("conv2d/conv2d.cuh").size() == 16);
}

TEST_CASE("output size follows PyTorch's formula for stride, padding and dilation") {
  auto p = problem({{"dtype", "float32"},
                    {"n", "2"},
                    {"c", "3"},
                    {"h", "11"},
                    {"w", "13"},
                    {"k", "5"},
                    {"r", "3"},
                    {"s", "4"},
                    {"stride_h", "2"},
                    {"stride_w", "3"},
                    {"pad_h", "1"},
                    {"pad_w", "2"},
                    {"dilation_h", "2"},
                    {"dilation_w", "1"}});
  const auto& c = as_conv(*p);
  CHECK(c.p() == (11 + 2 - 2 * 2 - 1) / 2 + 1);  // 5
  CHECK(c.q() == (13 + 4 - 1 * 3 - 1) / 3 + 1);  // 5
  CHECK(c.terms() == 3 * 3 * 4);
  CHECK(c.flops() == doctest::Approx(2.0 * 2 * 5 * 5 * 5 * 36));
  CHECK(c.bytes_moved() == doctest::Approx(4.0 * (2 * 3 * 11 * 13 + 5 * 3 * 12 + 2 * 5 * 5 * 5)));
  // The seed article's case: 768 x 512, 6 x 6 filter, no padding.
  auto seed = problem({{"dtype", "float32"}, {"c", "6"}, {"h", "768"}, {"w", "512"}, {"k", "6"}, {"r", "6"}});
  CHECK(as_conv(*seed).p() == 763);
  CHECK(as_conv(*seed).q() == 507);
  CHECK(as_conv(*seed).shape().s == 6);  // s defaults to r
}

TEST_CASE("signature is canonical and parses back; shorthands set both axes") {
  auto p = problem({{"dtype", "half"},
                    {"n", "3"},
                    {"c", "4"},
                    {"h", "9"},
                    {"w", "10"},
                    {"k", "8"},
                    {"r", "3"},
                    {"stride", "2"},
                    {"padding", "1"},
                    {"dilation", "2"},
                    {"bias", "1"}});
  CHECK(p->signature() ==
        "bias=1;c=4;dilation_h=2;dilation_w=2;dtype=float16;h=9;k=8;layout=nchw;n=3;pad_h=1;pad_w=1;r=3;s=3;stride_h=2;"
        "stride_w=2;w=10");
  CHECK(fam().parse_problem(p->signature())->signature() == p->signature());
  CHECK(p->group() == "float16|nchw|f=3x3|st=2x2|d=2x2");
  auto q = problem({{"dtype", "float32"},
                    {"c", "4"},
                    {"h", "9"},
                    {"w", "10"},
                    {"k", "8"},
                    {"r", "3"},
                    {"stride", "2"},
                    {"stride_w", "1"}});
  CHECK(as_conv(*q).shape().stride_h == 2);
  CHECK(as_conv(*q).shape().stride_w == 1);
}

TEST_CASE("bad problems are clear errors") {
  const std::map<std::string, std::string> base = {{"dtype", "float32"}, {"c", "3"}, {"h", "8"},
                                                   {"w", "8"},           {"k", "4"}, {"r", "3"}};
  auto with = [&](std::string key, std::string value) {
    auto o = base;
    o[key] = value;
    return o;
  };
  CHECK_THROWS_WITH_AS(problem(with("r", "9")), doctest::Contains("filter spans 9 x 9"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("r", "9")), doctest::Contains("padded input is only 8 x 8"),
                       InvalidArgument);
  CHECK_NOTHROW(problem([&] {
    auto o = with("r", "9");
    o["padding"] = "1";
    return o;
  }()));  // 9 <= 8 + 2
  CHECK_THROWS_WITH_AS(problem([&] {
                         auto o = with("dilation", "4");
                         return o;
                       }()),
                       doctest::Contains("dilation"),
                       InvalidArgument);  // (3-1)*4+1 = 9 > 8
  CHECK_THROWS_WITH_AS(problem(with("stride", "0")), doctest::Contains("stride_h = 0"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("padding", "-1")), doctest::Contains("negative"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("n", "-2")), doctest::Contains("negative"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("c", "0")), doctest::Contains("input channels C = 0"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("dtype", "int32")), doctest::Contains("not supported"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("bias", "2")), doctest::Contains("bias"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("h", "8x")), doctest::Contains("not an integer"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("groups", "2")), doctest::Contains("unknown option 'groups'"),
                       InvalidArgument);
  auto missing = base;
  missing.erase("k");
  CHECK_THROWS_WITH_AS(problem(missing), doctest::Contains("missing 'k'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem([&] {
                         auto o = with("n", "1073741824");
                         o["c"] = "65535";
                         return o;
                       }()),
                       doctest::Contains("exceeds 2^48"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem(with("h", "99999999999999999999")), doctest::Contains("not an integer"),
                       InvalidArgument);
  CHECK_NOTHROW(problem(with("n", "0")));  // an empty batch is a valid problem (the op launches nothing)
}

TEST_CASE("constraints prune by vector width, divisibility, stages, shared memory and registers") {
  const DeviceInfo dev = nominal_device(90);
  auto p = problem({{"dtype", "float32"}, {"c", "4"}, {"h", "64"}, {"w", "130"}, {"k", "8"}, {"r", "3"}});
  Config c = fam().heuristic(*p, dev);
  REQUIRE(fam().validate(*p, c, dev).empty());
  CHECK(c.at("load") == 2);     // W = 130: rows are 2-aligned
  CHECK(c.at("c_stage") == 4);  // one stage: no double buffering
  CHECK(c.at("double_buffer") == 0);
  auto why = [&](std::initializer_list<std::pair<const char*, std::int64_t>> changes) {
    Config x = c;
    for (auto [name, value] : changes) x.set(name, value);
    return fam().validate(*p, x, dev);
  };
  CHECK(why({{"load", 8}}).find("16 bytes") != std::string::npos);        // 32 bytes of float
  CHECK(why({{"load", 4}}).find("W = 130") != std::string::npos);         // rows not 4-aligned
  CHECK(why({{"load", 1}}).find("narrower loads") != std::string::npos);  // legal, not worth timing
  CHECK(why({{"k_block", 3}}).find("does not divide K = 8") != std::string::npos);
  CHECK(why({{"c_stage", 3}}).find("does not divide C = 4") != std::string::npos);
  CHECK(why({{"double_buffer", 1}}).find("two stages") != std::string::npos);
  CHECK(why({{"block_h", 1}, {"block_w", 16}}).find("threads") != std::string::npos);  // 16 < 32
  CHECK(why({{"block_h", 16}, {"block_w", 32}, {"max_regs", 168}}).find("cannot hold") != std::string::npos);
  CHECK(why({{"block_h", 16}, {"block_w", 32}, {"max_regs", 128}}).find("neighbourhood") !=
        std::string::npos);
  CHECK(why({{"out_h", 2}, {"out_w", 4}, {"max_regs", 128}}).find("the cap is 128") != std::string::npos);
  CHECK(why({{"out_h", 4}, {"out_w", 4}}).find("128 accumulators") != std::string::npos);  // 4x the default's
  CHECK(why({{"out_w", 2}}).empty());  // half the default's accumulators
  CHECK(why({{"k_block", 4}}).find("neither 8 nor twice") != std::string::npos);
  CHECK(why({{"out_h", 2}, {"out_w", 1}}).find("out_h 2 > out_w 1") != std::string::npos);
  // A wide dilation makes the input tile too large for shared memory.
  auto wide = problem({{"dtype", "float32"},
                       {"c", "16"},
                       {"h", "2000"},
                       {"w", "2000"},
                       {"k", "16"},
                       {"r", "7"},
                       {"dilation", "60"}});
  Config big{{"out_h", 4},    {"out_w", 4}, {"block_h", 16},      {"block_w", 32},  {"k_block", 1},
             {"c_stage", 16}, {"load", 4},  {"double_buffer", 0}, {"max_regs", 128}};
  big.set("c_stage", 8);
  big = with_fronts(big);
  CHECK(fam().validate(*wide, big, dev).find("shared memory") != std::string::npos);
  // A large filter caps the unrolled body.
  auto large = problem({{"dtype", "float32"}, {"c", "4"}, {"h", "64"}, {"w", "64"}, {"k", "32"}, {"r", "7"}});
  Config unrolled{{"out_h", 2},   {"out_w", 4}, {"block_h", 8},       {"block_w", 16},  {"k_block", 16},
                  {"c_stage", 1}, {"load", 4},  {"double_buffer", 0}, {"max_regs", 255}};
  unrolled = with_fronts(unrolled);
  CHECK(fam().validate(*large, unrolled, dev).find("unrolled body") != std::string::npos);
  // Every legal candidate validates; the heuristic comes first.
  std::size_t pruned = 0;
  auto legal = tuner::legal_candidates(fam(), *p, dev, pruned);
  CHECK(legal.front() == c);
  CHECK(legal.size() + pruned == fam().space().size());
  for (const Config& x : legal) CHECK(fam().validate(*p, x, dev).empty());
  // Register caps that fit no more blocks per SM than a larger cap are not timed (256 threads: 168 ~ 255).
  for (const Config& x : legal)
    if (x.at("block_h") * x.at("block_w") == 256) CHECK(x.at("max_regs") != 168);
}

TEST_CASE("the heuristic is legal for every filter size, stride, padding, dilation and tiny outputs") {
  for (int cc : {80, 90}) {
    const DeviceInfo dev = nominal_device(cc);
    for (const char* dtype : {"float32", "float16", "bfloat16"})
      for (int r = 1; r <= 7; ++r)
        for (int stride = 1; stride <= 2; ++stride)
          for (int dil = 1; dil <= 3; ++dil)
            for (auto [h, w] : {std::pair{1, 1}, {5, 3}, {6, 4}, {8, 10}, {17, 33}, {224, 224}})
              for (int c : {1, 3, 16, 64}) {
                const int pad = std::max(0, ((r - 1) * dil + 1 - std::min(h, w) + 1) / 2);
                auto p = problem({{"dtype", dtype},
                                  {"c", std::to_string(c)},
                                  {"h", std::to_string(h)},
                                  {"w", std::to_string(w)},
                                  {"k", std::to_string(c == 3 ? 5 : c)},
                                  {"r", std::to_string(r)},
                                  {"stride", std::to_string(stride)},
                                  {"padding", std::to_string(pad)},
                                  {"dilation", std::to_string(dil)}});
                const Config h0 = fam().heuristic(*p, dev);
                INFO(p->signature(), " -> ", h0.text());
                CHECK(fam().validate(*p, h0, dev).empty());
                const auto g = templates::conv2d::tile_geometry(as_conv(*p), h0);
                // The default tile never exceeds twice the output in either direction by more than one block
                // row.
                CHECK(g.tile_w <= std::max<std::int64_t>(8 * h0.at("out_w"), 2 * as_conv(*p).q()));
              }
  }
}

TEST_CASE("the public cases have tuning spaces of a tractable size") {
  const DeviceInfo dev = nominal_device(90);
  for (const auto& [name, signature] : fam().default_suite()) {
    auto p = fam().parse_problem(signature);
    std::size_t pruned = 0;
    auto legal = tuner::legal_candidates(fam(), *p, dev, pruned);
    MESSAGE(name, ": ", legal.size(), " legal, ", pruned, " pruned");
    // float32 channels last runs Winograd only: its space alone.
    const bool winograd_only = name.rfind("conv_float32_", 0) == 0 && name.find("_nhwc") != std::string::npos;
    CHECK(legal.size() >= (winograd_only ? 24u : 40u));
    // Exhaustive tuning compiles each (about half a second of NVRTC per candidate, in parallel): the 22 cases'
    // 2970 candidates tuned in 124 s on the H100 host before split_k, 4632 in 210 s before repack (4875 with it;
    // 6016 with the four fused-epilogue cases in 278 s; bench/RESULTS.md). repack 2 and 64 x 256 tiles took the
    // largest, N1 C256 14x14 float16, from 435 to 465.
    CHECK(legal.size() <= 480);
    CHECK(legal.front() == fam().heuristic(*p, dev));
  }
  CHECK(fam().default_suite().size() == 42);
  CHECK(fam().default_suite()[28].first == "conv_float32_N1C64H56W56K64R3P1");
  CHECK(fam().default_suite()[34].first == "conv_float32_N32C64H56W56K64R3P1_nhwc");
  // The float32 layers again with the TF32 opt-in (issue 18 item 3).
  CHECK(fam().default_suite()[35].first == "conv_float32_N1C64H56W56K64R3P1_tf32");
  CHECK(fam().default_suite()[35].second.find(";pad_w=1;precision=tf32;") != std::string::npos);
  CHECK(fam().default_suite().back().first == "conv_float32_N32C64H56W56K64R3P1_nhwc_tf32");
  CHECK(fam().default_suite()[23].first == "conv_float16_N1C320H64W64K320R3P1_nhwc");
  CHECK(fam().default_suite()[21].second.find("layout=nhwc") != std::string::npos);
  CHECK(fam().default_suite()[27].first == "conv_float16_N1C64H56W56K64R3P1_bias_add_relu");
  CHECK(fam().default_suite()[27].second.find(";epilogue=y = max ( acc + r , 0.0f );") != std::string::npos);
  CHECK(fam().default_suite()[17].first == "conv_float16_N32C128H56W56K128R3S2P1");
  CHECK(fam().default_suite().front().first == "conv_float32_N1C6H768W512K6R6");
}

TEST_CASE("workload is random and never zero; the reference matches the definition") {
  for (const char* dtype : {"float32", "float16"}) {
    auto p = problem({{"dtype", dtype},
                      {"n", "2"},
                      {"c", "3"},
                      {"h", "9"},
                      {"w", "11"},
                      {"k", "4"},
                      {"r", "3"},
                      {"s", "2"},
                      {"stride_h", "2"},
                      {"pad_w", "2"},
                      {"dilation_w", "2"},
                      {"bias", "1"}});
    const auto& c = as_conv(*p);
    Workload w = fam().workload(c, 7);
    REQUIRE(w.inputs.size() == 3);
    const DType dt = c.dtype();
    std::set<double> distinct;
    for (std::size_t i = 0; i < w.inputs[0].size() / dtype_size(dt); ++i) {
      const double v = load_element(dt, w.inputs[0].data(), i);
      CHECK(v != 0.0);
      distinct.insert(v);
    }
    CHECK(distinct.size() > 100);
    CHECK(fam().workload(c, 8).inputs[0] != w.inputs[0]);
    auto ref = fam().reference(c, w);
    REQUIRE(ref.size() == 1);
    REQUIRE(ref[0].size() == w.output_bytes[0]);
    const OutputCheck check = fam().output_check(c, 0);
    const auto& s = c.shape();
    for (std::int64_t n = 0; n < s.n; ++n)
      for (std::int64_t k = 0; k < s.k; ++k)
        for (std::int64_t oy = 0; oy < c.p(); ++oy)
          for (std::int64_t ox = 0; ox < c.q(); ++ox) {
            const double expected = naive(c, w.inputs[0], w.inputs[1], &w.inputs[2], n, k, oy, ox);
            const double got = load_element(
                dt, ref[0].data(), static_cast<std::uint64_t>(((n * s.k + k) * c.p() + oy) * c.q() + ox));
            REQUIRE(std::fabs(got - expected) <= check.atol + check.rtol * std::fabs(expected));
          }
  }
}

TEST_CASE("implicit GEMM (algo 1): where the default uses it, and its limits") {
  const DeviceInfo dev = nominal_device(90);
  auto conv = [](const char* dtype, const char* c, const char* k) {
    return problem({{"dtype", dtype}, {"n", "2"}, {"c", c}, {"h", "56"}, {"w", "56"}, {"k", k}, {"r", "3"},
                    {"padding", "1"}});
  };
  auto f16 = conv("float16", "64", "64"), f32 = conv("float32", "64", "64"), few = conv("float16", "4", "64");
  const Config tc = fam().heuristic(*f16, dev);
  CHECK(tc.at("algo") == 1);
  CHECK(fam().validate(*f16, tc, dev).empty());
  CHECK(tc.at("out_h") == 1);  // the direct kernel's knobs hold their first values
  CHECK(fam().heuristic(*conv("bfloat16", "64", "64"), dev).at("algo") == 1);
  // float32 never runs on tensor cores without an explicit opt-in: a 3x3 of stride 1 takes Winograd in float.
  CHECK(fam().heuristic(*f32, dev).at("algo") >= 3);
  CHECK(fam().heuristic(*few, dev).at("algo") != 1);  // few channels: a direct kernel
  CHECK(fam().heuristic(*f16, nominal_device(80)).at("algo") == 1);
  auto why = [&](const Problem& p, std::initializer_list<std::pair<const char*, std::int64_t>> changes,
                 const DeviceInfo& d) {
    Config x = tc;
    for (auto [name, value] : changes) x.set(name, value);
    return fam().validate(p, x, d);
  };
  CHECK(why(*f32, {}, dev).find("takes float16 or bfloat16, or float32 where the problem opts in to TF32 (precision "
                                "tf32); this float32 problem keeps its products exact") != std::string::npos);
  DeviceInfo turing = nominal_device(80);
  turing.cc_major = 7, turing.cc_minor = 5;
  CHECK(why(*f16, {}, turing).find("(sm_80 or newer); the device is sm_75") != std::string::npos);
  CHECK(why(*f16, {{"tile_m", 32}, {"warps_m", 4}}, dev).find("not a multiple of 16 x 16") != std::string::npos);
  CHECK(why(*f16, {{"tile_m", 256}, {"tile_n", 128}, {"warps_m", 2}, {"warps_n", 1}}, dev)
            .find("accumulators per thread") != std::string::npos);
  CHECK(why(*f16, {{"tile_n", 128}}, dev).find("at least twice K = 64") != std::string::npos);
  CHECK(why(*f16, {{"out_w", 2}}, dev).find("applies only where algo=0") != std::string::npos);
  // The cp.async pipeline copies 8-channel taps of channels last, or pixel runs of an NCHW 1x1 (below).
  CHECK(why(*f16, {{"stages", 3}}, dev).find("on an NCHW x (repack 0) copies runs of pixels: it needs a 1x1 filter") !=
        std::string::npos);
  CHECK(why(*f16, {{"tile_m", 128}, {"warps_m", 1}, {"tile_n", 32}, {"warps_n", 2}, {"tile_k", 32}}, dev)
            .find("warp tile 128 x 16 (tuned") != std::string::npos);
  // Split-K: too few output tiles share their reduction through a workspace of arrival counters (zeroed once,
  // reset by the kernel) and float partial tiles; a split with no stage of the reduction is refused.
  CHECK(why(*f16, {{"split_k", 8}}, dev).find("split_k 8 leaves a split without work: C * R * S = 576 is 9 stages") !=
        std::string::npos);
  CHECK(fam().prep(*f16, tc).workspace_bytes == 0);  // 2 x 56 x 56 pixels: enough tiles, no split
  auto deep = problem({{"dtype", "float16"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"}, {"r", "3"},
                       {"padding", "1"}});
  const Config d = fam().heuristic(*deep, dev);
  const std::int64_t split = d.at("split_k");
  CHECK(split > 1);
  CHECK(fam().validate(*deep, d, dev).empty());
  const std::size_t tiles = static_cast<std::size_t>((196 + d.at("tile_m") - 1) / d.at("tile_m") *
                                                     ((256 + d.at("tile_n") - 1) / d.at("tile_n")));
  const LaunchPrep prep = fam().prep(*deep, d);
  CHECK(prep.zero_begin == 0);
  CHECK(prep.zero_end == tiles * 4);
  CHECK(prep.rezeroed_by_kernel);
  CHECK(prep.workspace_bytes ==
        (tiles * 4 + 255) / 256 * 256 + tiles * static_cast<std::size_t>(split * d.at("tile_m") * d.at("tile_n")) * 4);
  CHECK(fam().launch_shape(*deep, d, dev).grid.z == static_cast<unsigned>(split));
  CHECK(why(*deep, {{"split_k", 1}}, dev).empty());
  // Where the tiles already fill the SMs a split is off the tuned neighbourhood.
  CHECK(why(*f16, {{"split_k", 2}}, dev).find("output tiles already give every SM a block") != std::string::npos);
  // Every legal tensor-core candidate of a float16 problem validates; float32 has none.
  std::size_t pruned = 0;
  std::size_t tensor = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *f16, dev, pruned)) {
    CHECK(fam().validate(*f16, x, dev).empty());
    tensor += x.at("algo") == 1;
  }
  CHECK(tensor >= 20);
  for (const Config& x : tuner::legal_candidates(fam(), *f32, dev, pruned))
    CHECK((x.at("algo") == 0 || x.at("algo") >= 3));
}

TEST_CASE("wgmma (mma 1): sm_90 only, its tile rules, and the channels-last default there") {
  const DeviceInfo hopper = nominal_device(90), ampere = nominal_device(80);
  auto body = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                       {"r", "3"}, {"padding", "1"}, {"layout", "nhwc"}});
  auto wide = problem({{"dtype", "bfloat16"}, {"n", "32"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"},
                       {"r", "3"}, {"padding", "1"}, {"layout", "nhwc"}});
  // The default on sm_90: two warpgroups of 64 pixels, 64 or 128 channels, four cp.async stages; mma.sync on sm_80.
  const Config h = fam().heuristic(*body, hopper);
  CHECK(h.at("algo") == 1);
  CHECK(h.at("mma") == 1);
  CHECK(h.at("tile_m") == 128);
  CHECK(h.at("warps_m") == 2);
  CHECK(h.at("tile_n") == 64);
  CHECK(h.at("stages") == 4);
  CHECK(fam().validate(*body, h, hopper).empty());
  CHECK(fam().heuristic(*wide, hopper).at("tile_n") == 128);
  CHECK(fam().validate(*wide, fam().heuristic(*wide, hopper), hopper).empty());
  CHECK(fam().heuristic(*body, ampere).at("mma") == 0);
  // Two warpgroups: 256 threads; swizzled rows of 64 halves, four buffers, 1024 bytes to align them.
  const LaunchShape shape = fam().launch_shape(*body, h, hopper);
  CHECK(shape.block.x == 256);
  CHECK(shape.shared_bytes == 4 * (128 + 64) * 64 * 2 + 1024);
  // NCHW with C a multiple of 8 repacks x and w to channels last and runs the same pipeline (repack 1); wgmma
  // through registers (stages 0) stays legal there.
  auto nchw = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                       {"r", "3"}, {"padding", "1"}});
  const Config hn = fam().heuristic(*nchw, hopper);
  CHECK(hn.at("mma") == 1);
  CHECK(hn.at("repack") == 1);
  CHECK(hn.at("stages") == 4);
  CHECK(fam().heuristic(*nchw, ampere).at("repack") == 0);
  Config staged = h;
  staged.set("stages", 0);
  CHECK(templates::conv2d::kernel_limits(as_conv(*nchw), staged, hopper).empty());
  auto why = [&](std::initializer_list<std::pair<const char*, std::int64_t>> changes, const DeviceInfo& d) {
    Config x = h;
    for (auto [name, value] : changes) x.set(name, value);
    return fam().validate(*body, x, d);
  };
  CHECK(why({}, ampere).find("mma 1 (wgmma) runs on sm_90 only; the device is sm_80") != std::string::npos);
  CHECK(why({{"tile_k", 32}}, hopper).find("tile_k 64 for float16, not 32") != std::string::npos);
  CHECK(why({{"warps_m", 1}}, hopper).find("tile_m = 64 * warps_m (128 with warps_m 1)") != std::string::npos);
  CHECK(why({{"warps_n", 2}}, hopper).find("channels in 64s; tile_n / warps_n = 32") != std::string::npos);
  CHECK(why({{"stages", 2}}, hopper).find("stages 0 (through registers) or 3 and more") != std::string::npos);
  // Every legal wgmma candidate of the problem follows those rules; mma.sync ones are there too.
  std::size_t pruned = 0, wgmma = 0, mma_sync = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *body, hopper, pruned)) {
    if (x.at("algo") != 1) continue;
    if (x.at("mma") == 1) {
      ++wgmma;
      CHECK(x.at("tile_k") == 64);
      CHECK(x.at("tile_m") == 64 * x.at("warps_m"));
      CHECK((x.at("tile_n") / x.at("warps_n")) % 64 == 0);
    } else {
      ++mma_sync;
    }
  }
  CHECK(wgmma >= 4);
  CHECK(mma_sync >= 20);
  for (const Config& x : tuner::legal_candidates(fam(), *body, ampere, pruned)) CHECK(x.at("mma") == 0);
}

TEST_CASE("repack 1: NCHW copied to channels last in one cooperative launch; its rules, workspace and default") {
  const DeviceInfo hopper = nominal_device(90), ampere = nominal_device(80);
  auto p = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                    {"r", "3"}, {"padding", "1"}, {"bias", "1"}});
  const Config h = fam().heuristic(*p, hopper);
  REQUIRE(h.at("repack") == 1);
  REQUIRE(fam().validate(*p, h, hopper).empty());
  // One resident wave takes the 784 x 1 output tiles in turn (the loader caps the grid at the occupancy).
  const LaunchShape shape = fam().launch_shape(*p, h, hopper);
  CHECK(shape.cooperative);
  CHECK(shape.grid.x == 784);
  CHECK(shape.grid.y == 1);
  CHECK(shape.grid.z == 1);
  // The barrier counter (256 bytes), x as {N,H,W,C}, w as {K,R,S,C}; the kernel resets the counter.
  const LaunchPrep prep = fam().prep(*p, h);
  CHECK(prep.workspace_bytes == 256 + 32ull * 64 * 56 * 56 * 2 + 64ull * 64 * 9 * 2);
  CHECK(prep.zero_begin == 0);
  CHECK(prep.zero_end == 4);
  CHECK(prep.rezeroed_by_kernel);
  // A 1x1 filter's weights are copied too (the copy is aligned where w may not be); its default reads x in place
  // (pixel runs, below), repack 1 stays legal. Split-K's counters follow the barrier's.
  auto one = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "256"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                      {"r", "1"}});
  Config split = templates::conv2d::detail::igemm_heuristic(as_conv(*one), hopper);
  CHECK(split.at("repack") == 0);
  split.set("repack", 1);
  REQUIRE(templates::conv2d::kernel_limits(as_conv(*one), split, hopper).empty());  // legal, off the neighbourhood
  CHECK(fam().prep(*one, split).workspace_bytes == 256 + 32ull * 256 * 56 * 56 * 2 + 64ull * 256 * 2);
  auto small = problem({{"dtype", "bfloat16"}, {"n", "1"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"},
                        {"r", "3"}, {"padding", "1"}});
  Config s2{{"algo", 1}, {"mma", 1}, {"tile_m", 64}, {"tile_n", 64}, {"tile_k", 64}, {"warps_m", 1},
            {"warps_n", 1}, {"min_blocks", 1}, {"stages", 4}, {"split_k", 2}, {"repack", 1}};
  s2 = with_fronts(s2);
  REQUIRE(fam().validate(*small, s2, hopper).empty());
  const LaunchPrep p2 = fam().prep(*small, s2);
  const std::size_t tiles = 4 * 4, split_bytes = 256 + tiles * 2 * 64 * 64 * 4;
  CHECK(p2.zero_end == 256 + tiles * 4);
  CHECK(p2.workspace_bytes == 256 + split_bytes + (196 * 256 * 2 + 255) / 256 * 256 + 256 * 9 * 256 * 2);
  CHECK(fam().launch_shape(*small, s2, hopper).grid.x == tiles * 2);
  // Its rules: NCHW only, C a multiple of 8, the pipeline (stages > 0); on sm_90 tuned with wgmma only.
  auto why = [&](const Problem& q, std::initializer_list<std::pair<const char*, std::int64_t>> changes,
                 const DeviceInfo& d) {
    Config x = h;
    for (auto [name, value] : changes) x.set(name, value);
    return fam().validate(q, x, d);
  };
  auto nhwc = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                       {"r", "3"}, {"padding", "1"}, {"layout", "nhwc"}});
  CHECK(why(*nhwc, {}, hopper).find("repack 1 copies an NCHW input to channels last") != std::string::npos);
  auto odd = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "60"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                      {"r", "3"}, {"padding", "1"}});
  CHECK(why(*odd, {}, hopper).find("C a multiple of 8 (C = 60)") != std::string::npos);
  CHECK(why(*p, {{"stages", 0}}, hopper).find("stages 2 to 8 (stages 0)") != std::string::npos);
  CHECK(why(*p, {{"repack", 0}}, hopper).find("repack 1 copies x to channels last first") != std::string::npos);
  CHECK(why(*p, {{"mma", 0}, {"warps_m", 2}, {"warps_n", 2}, {"tile_m", 128}, {"tile_n", 64}}, hopper)
            .find("repack 1 with mma.sync on sm_90") != std::string::npos);
  // sm_80 tunes it on mma.sync; every legal repacking candidate there pipelines.
  std::size_t pruned = 0, repacking = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *p, ampere, pruned))
    if (x.at("algo") == 1 && x.at("repack") == 1) {
      ++repacking;
      CHECK(x.at("stages") > 0);
      CHECK(x.at("mma") == 0);
    }
  CHECK(repacking >= 4);
  // Copies past the 4 GiB workspace limit: refused with the reason, and the default reads x in place.
  auto huge = problem({{"dtype", "float16"}, {"n", "256"}, {"c", "128"}, {"h", "256"}, {"w", "256"}, {"k", "64"},
                       {"r", "3"}, {"padding", "1"}});
  CHECK(why(*huge, {}, hopper).find("at most 4 GiB: repack 0 reads them in place") != std::string::npos);
  const Config hh = fam().heuristic(*huge, hopper);
  CHECK(hh.at("algo") == 1);
  CHECK(hh.at("repack") == 0);
  CHECK(fam().validate(*huge, hh, hopper).empty());
  // A misaligned x or w keeps the repacking kernel (its copies are aligned): variant 0.
  const std::uint8_t classes[] = {2, 2, 16, 16};
  const void* ptrs[] = {nullptr, nullptr, nullptr, nullptr};
  Bindings b;
  b.pointers = ptrs;
  b.alignment = classes;
  CHECK(fam().variant(*p, h, b) == 0);
  Config in_place = fam().heuristic(*nhwc, hopper);
  CHECK(fam().variant(*nhwc, in_place, b) == 1);
}

TEST_CASE("repack 2: the NCHW copies as rings of cp.async tiles; its plan, rules, own template, variant, NVRTC") {
  namespace d = templates::conv2d::detail;
  const DeviceInfo hopper = nominal_device(90), ampere = nominal_device(80);
  // The plan (mirrors igemm_repack.cuh): whole rows split evenly where 64 channels of them fit a ring stage,
  // 64-position segments of up to 64 channels where they do not and L is a multiple of 8, neither otherwise.
  const d::RepackPlan x7 = d::repack_plan(512, 49, 24576, 8);
  CHECK(x7.flat);
  CHECK(x7.kc == 256);  // two tiles of 256 rows of 49, not 496 + 16
  CHECK(x7.kl == 49);
  const d::RepackPlan w3 = d::repack_plan(512, 9, 24576, 8);
  CHECK((w3.flat && w3.kc == 512 && w3.kl == 9));
  const d::RepackPlan x56 = d::repack_plan(64, 3136, 12288, 8);
  CHECK_FALSE(x56.flat);
  CHECK(x56.kc == 64);
  CHECK(x56.kl == 192);
  const d::RepackPlan narrow = d::repack_plan(64, 3136, 2048, 8);  // 64 x 64 does not fit: 32 channels
  CHECK((!narrow.flat && narrow.kc == 32 && narrow.kl == 64));
  const d::RepackPlan f32 = d::repack_plan(24, 196, 3000, 4);  // TF32 chunks of 4: 12 whole rows fit, 24 do not
  CHECK((!f32.flat && f32.kc == 24 && f32.kl == 64));
  const d::RepackPlan f32_odd = d::repack_plan(24, 195, 3000, 4);  // 195 is not a multiple of 4: 12 whole rows
  CHECK((f32_odd.flat && f32_odd.kc == 12 && f32_odd.kl == 195));
  CHECK(d::repack_plan(64, 6003, 8192, 8).kc == 0);  // an odd, long row: neither form fits
  // 48 channels under a small stage: halved in whole groups of 8 (48, 24, 8), never to zero.
  const d::RepackPlan halved = d::repack_plan(48, 2368, 600, 8);
  CHECK((!halved.flat && halved.kc == 8 && halved.kl == 64));

  auto p = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "512"}, {"h", "7"}, {"w", "7"}, {"k", "512"},
                    {"r", "3"}, {"padding", "1"}, {"bias", "1"}});
  // The default takes repack 3 up to 196 output pixels (7x7, 14x14; TF32 14x14 too, whose y is not staged)
  // and wherever repack 2 would stage y, repack 1 elsewhere (28x28).
  Config c = fam().heuristic(*p, hopper);
  REQUIRE(c.at("algo") == 1);
  CHECK(c.at("repack") == 3);
  REQUIRE(fam().validate(*p, c, hopper).empty());
  auto p14 = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"},
                      {"r", "3"}, {"padding", "1"}});
  CHECK(fam().heuristic(*p14, hopper).at("repack") == 3);
  auto p28 = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "128"}, {"h", "28"}, {"w", "28"}, {"k", "128"},
                      {"r", "3"}, {"padding", "1"}});
  CHECK(fam().heuristic(*p28, hopper).at("repack") == 1);
  auto tf14 = problem({{"dtype", "float32"}, {"precision", "tf32"}, {"n", "32"}, {"c", "256"}, {"h", "14"},
                       {"w", "14"}, {"k", "256"}, {"r", "3"}, {"padding", "1"}});
  CHECK(fam().heuristic(*tf14, hopper).at("repack") == 3);
  auto tf7 = problem({{"dtype", "float32"}, {"precision", "tf32"}, {"n", "32"}, {"c", "512"}, {"h", "7"}, {"w", "7"},
                      {"k", "512"}, {"r", "3"}, {"padding", "1"}});
  CHECK(fam().heuristic(*tf7, hopper).at("repack") == 3);
  c.set("repack", 2);
  // Its own template (the records of repack 0 and 1 keep theirs), repack 1's launch and workspace, plus y staged
  // channels last where P * Q (49) is not a multiple of 8.
  CHECK(fam().template_of(c) == "conv2d/igemm_repack.cuh");
  Config one = c;
  one.set("repack", 1);
  CHECK(fam().template_of(one) == fam().template_name());
  CHECK(d::repack2_stages_y(as_conv(*p)));
  CHECK(fam().prep(*p, c).workspace_bytes == fam().prep(*p, one).workspace_bytes + 32ull * 49 * 512 * 2);
  CHECK(fam().source(*p, c).name_expression.find(", 1, 1>") != std::string::npos);  // bias, y staged
  auto big = problem({{"dtype", "float16"}, {"n", "4"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                      {"r", "3"}, {"padding", "1"}});
  CHECK_FALSE(d::repack2_stages_y(as_conv(*big)));
  Config b2 = fam().heuristic(*big, hopper);
  b2.set("repack", 2);
  CHECK(fam().prep(*big, b2).workspace_bytes == fam().prep(*big, [&] {
    Config z = b2;
    z.set("repack", 1);
    return z;
  }()).workspace_bytes);
  CHECK(fam().source(*big, b2).name_expression.find(", 0, 0>") != std::string::npos);
  // Staging y takes whole 16-byte chunks of channels: K a multiple of 8.
  auto odd_k = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "64"}, {"h", "7"}, {"w", "7"}, {"k", "100"},
                        {"r", "3"}, {"padding", "1"}});
  Config k2 = fam().heuristic(*odd_k, hopper);
  k2.set("repack", 2), k2.set("stages", 4), k2.set("mma", 1), k2.set("tile_m", 64), k2.set("warps_m", 1);
  k2.set("tile_n", 128), k2.set("warps_n", 1), k2.set("tile_k", 64), k2.set("split_k", 1);
  CHECK(templates::conv2d::kernel_limits(as_conv(*odd_k), k2, hopper).find("K a multiple of 8 (K = 100)") != std::string::npos);
  CHECK(fam().prep(*p, c).rezeroed_by_kernel);
  CHECK(fam().launch_shape(*p, c, hopper).cooperative);
  CHECK(fam().source(*p, c).name_expression.rfind("jitune::conv::conv2d_igemm_repacked<__half, 512, 512, 3, 3,", 0) == 0);
  CHECK(fam().source(*p, c).program.find("#include \"conv2d/igemm_repack.cuh\"") != std::string::npos);
  // The ring lives in the stage buffers: 4 stages of (64 + 128) x 64 halves, in four buffers.
  Config t = c;
  t.set("tile_m", 64), t.set("tile_n", 128), t.set("warps_m", 1), t.set("warps_n", 1), t.set("stages", 4);
  t.set("split_k", 1);
  CHECK(d::repack_capacity(as_conv(*p), t) == 4 * 192 * 64 / 4);
  Config t1 = t;
  t1.set("repack", 1);
  CHECK(fam().launch_shape(*p, t, hopper).shared_bytes == fam().launch_shape(*p, t1, hopper).shared_bytes);
  // Rules: NCHW only, C a multiple of 8, stages; the plan must fit (repack 1 copies any shape).
  auto nhwc = problem({{"dtype", "float16"}, {"n", "2"}, {"c", "64"}, {"h", "8"}, {"w", "8"}, {"k", "64"},
                       {"r", "3"}, {"padding", "1"}, {"layout", "nhwc"}});
  Config n2 = fam().heuristic(*nhwc, hopper);
  n2.set("repack", 2);
  CHECK(fam().validate(*nhwc, n2, hopper).find("repack 2 copies an NCHW input to channels last") == 0);
  auto odd = problem({{"dtype", "float16"}, {"n", "1"}, {"c", "64"}, {"h", "3"}, {"w", "2001"}, {"k", "64"},
                      {"r", "3"}, {"padding", "1"}});
  Config o2{{"algo", 1}, {"mma", 1}, {"tile_m", 64}, {"tile_n", 64}, {"tile_k", 64}, {"warps_m", 1},
            {"warps_n", 1}, {"min_blocks", 1}, {"stages", 4}, {"split_k", 1}, {"repack", 2}};
  o2 = with_fronts(o2);
  CHECK(templates::conv2d::kernel_limits(as_conv(*odd), o2, hopper).find("repack 2 copies whole rows of 6003 positions") == 0);
  o2.set("repack", 1);
  CHECK(templates::conv2d::kernel_limits(as_conv(*odd), o2, hopper).empty());
  // Tuned beside repack 1 on sm_90.
  std::size_t pruned = 0, twos = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *p, hopper, pruned)) twos += x.at("algo") == 1 && x.at("repack") == 2;
  CHECK(twos >= 8);
  // x or w off 16 bytes: slot 1, repack 1 of the same tiles (it reads any alignment).
  alignas(16) static std::byte buffer[64];
  const std::uint8_t classes[] = {16, 16, 16, 16};
  const void* aligned_ptrs[] = {buffer, buffer, buffer, buffer};
  const void* off_ptrs[] = {buffer + 2, buffer, buffer, buffer};
  Bindings b;
  b.alignment = classes;
  b.pointers = aligned_ptrs;
  CHECK(fam().variant(*p, c, b) == 0);
  b.pointers = off_ptrs;
  CHECK(fam().variant(*p, c, b) == 1);
  const void* y_off[] = {buffer, buffer, buffer, buffer + 2};  // y unstaged in 16-byte chunks
  b.pointers = y_off;
  CHECK(fam().variant(*p, c, b) == 1);
  const Config fallback = fam().variant_config(*p, c, 1, hopper);
  CHECK(fallback.at("repack") == 1);
  CHECK(fallback.at("stages") == c.at("stages"));
  CHECK(fam().validate(*p, fallback, hopper).empty());
  // NVRTC: float16 7x7 with 256-channel tiles, bfloat16 with split-K, TF32 with long rows (segments), mma.sync on
  // sm_80, and a residual epilogue; none spills.
  Compiler compiler;
  Config wide = c;
  wide.set("tile_m", 64), wide.set("tile_n", 256), wide.set("warps_m", 1), wide.set("warps_n", 2);
  wide.set("stages", 4), wide.set("split_k", 1);
  CHECK(require_compiles(compiler, *p, wide, hopper).rfind("jitune::conv::conv2d_igemm_repacked<", 0) == 0);
  auto bf = problem({{"dtype", "bfloat16"}, {"n", "1"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"},
                     {"r", "3"}, {"padding", "1"}});
  Config s2{{"algo", 1}, {"mma", 1}, {"tile_m", 64}, {"tile_n", 64}, {"tile_k", 64}, {"warps_m", 1},
            {"warps_n", 1}, {"min_blocks", 1}, {"stages", 4}, {"split_k", 2}, {"repack", 2}};
  require_compiles(compiler, *bf, with_fronts(s2), hopper);
  auto tf = problem({{"dtype", "float32"}, {"precision", "tf32"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"},
                     {"k", "64"}, {"r", "3"}, {"padding", "1"}});
  Config t2 = fam().heuristic(*tf, hopper);
  REQUIRE(t2.at("repack") != 0);
  t2.set("repack", 2);
  require_compiles(compiler, *tf, t2, hopper);
  auto res = problem({{"dtype", "float16"}, {"n", "2"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                      {"r", "3"}, {"padding", "1"}, {"bias", "1"}, {"epilogue", "y = max(acc + r, 0.0f)"}});
  Config m2{{"algo", 1}, {"mma", 0}, {"tile_m", 128}, {"tile_n", 64}, {"tile_k", 32}, {"warps_m", 2},
            {"warps_n", 2}, {"min_blocks", 1}, {"stages", 3}, {"split_k", 1}, {"repack", 2}};
  CHECK(require_compiles(compiler, *res, with_fronts(m2), ampere).find(", 1, 0, jitune_conv_epilogue>") != std::string::npos);
  // y staged (7 x 7) with a residual epilogue applied as it is unstaged.
  auto res7 = problem({{"dtype", "bfloat16"}, {"n", "8"}, {"c", "64"}, {"h", "7"}, {"w", "7"}, {"k", "96"},
                       {"r", "3"}, {"padding", "1"}, {"bias", "1"}, {"epilogue", "y = max(acc + r, 0.0f)"}});
  Config r7{{"algo", 1}, {"mma", 1}, {"tile_m", 64}, {"tile_n", 64}, {"tile_k", 64}, {"warps_m", 1},
            {"warps_n", 1}, {"min_blocks", 1}, {"stages", 4}, {"split_k", 2}, {"repack", 2}};
  CHECK(require_compiles(compiler, *res7, with_fronts(r7), hopper).find(", 1, 1, jitune_conv_epilogue>") != std::string::npos);
}

TEST_CASE("repack 3: the repacking as a call of up to three launches (steps); their programs, args, rules, NVRTC") {
  namespace d = templates::conv2d::detail;
  const DeviceInfo hopper = nominal_device(90), ampere = nominal_device(80);
  auto p = problem({{"dtype", "float16"}, {"n", "32"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"},
                    {"r", "3"}, {"padding", "1"}, {"bias", "1"}});
  Config c{{"algo", 1}, {"mma", 1}, {"tile_m", 64}, {"tile_n", 256}, {"tile_k", 64}, {"warps_m", 1},
           {"warps_n", 2}, {"min_blocks", 1}, {"stages", 4}, {"split_k", 1}, {"repack", 3}};
  c = with_fronts(c);
  REQUIRE(fam().validate(*p, c, hopper).empty());
  CHECK(fam().template_of(c) == "conv2d/igemm_launches.cuh");
  const std::vector<std::string_view> all = fam().templates();
  CHECK(std::find(all.begin(), all.end(), std::string_view("conv2d/igemm_launches.cuh")) != all.end());
  // The main kernel: a block per tile and split (98 x 1 tiles of 64 x 256), programmatic on sm_90, no cooperation.
  const LaunchShape main = fam().launch_shape(*p, c, hopper);
  CHECK_FALSE(main.cooperative);
  CHECK(main.programmatic);
  CHECK(main.grid.x == 98);
  CHECK_FALSE(fam().launch_shape(*p, c, ampere).programmatic);
  CHECK(fam().source(*p, c).name_expression.rfind("jitune::conv::conv2d_igemm_after_copy<__half, 256, 256, 3, 3,", 0) ==
        0);
  // Steps: the copy before (one program for every epilogue), the unstaging after (196 pixels: y staged).
  const std::vector<StepKernel> steps = fam().steps(*p, c, hopper);
  REQUIRE(steps.size() == 2);
  CHECK_FALSE(steps[0].after);
  CHECK(steps[0].source.name_expression == "jitune::conv::conv2d_repack_copy<__half, 256, 256, 9>");
  CHECK(steps[0].source.program == "#include \"conv2d/igemm_launches.cuh\"\n");
  CHECK(steps[0].shape.block.x == 256);
  // A block per tile: x's 8192 rows of 196 whole, 16 16-bit channels a tile (512 tiles), w's 65536 rows of 9
  // taps seven row groups of 64 channels a tile (147); the unstaging 32 images x 4 x 4 (pieces of 49).
  CHECK(steps[0].shape.shared_bytes == 0);
  CHECK(steps[0].shape.grid.x == 512 + 147);
  CHECK(d::repack3_tiles(as_conv(*p)) == 659);
  CHECK(steps[1].after);
  CHECK(steps[1].shape.programmatic);
  CHECK(steps[1].shape.grid.x == 512);
  CHECK_FALSE(steps[0].shape.programmatic);
  CHECK(steps[1].source.name_expression == "jitune::conv::conv2d_unstage<__half, 256>");
  // Every other config has none; a 28 x 28 image (784 pixels) is not staged: the copy alone.
  Config two = c;
  two.set("repack", 2);
  CHECK(fam().steps(*p, two, hopper).empty());
  auto p28 = problem({{"dtype", "float16"}, {"n", "8"}, {"c", "128"}, {"h", "28"}, {"w", "28"}, {"k", "128"},
                      {"r", "3"}, {"padding", "1"}});
  Config c28 = c;
  c28.set("tile_n", 128), c28.set("warps_n", 1);
  REQUIRE(fam().validate(*p28, c28, hopper).empty());
  CHECK(fam().steps(*p28, c28, hopper).size() == 1);
  // The workspace is repack 2's (y staged after w); the main kernel takes the copies' addresses after the workspace,
  // the copy its two destinations, the unstaging the staged y.
  CHECK(fam().prep(*p, c).workspace_bytes == fam().prep(*p, two).workspace_bytes);
  const d::RepackOffsets o = d::repack_offsets(as_conv(*p), c);
  CHECK(o.split == 256);
  CHECK(o.x == 256);
  CHECK(o.w == o.x + 32ull * 256 * 196 * 2);
  CHECK(o.y == o.w + 256ull * 256 * 9 * 2);
  CHECK(o.end == fam().prep(*p, c).workspace_bytes);
  alignas(256) static std::byte buffer[64];
  const std::uint8_t classes[] = {16, 16, 16, 16};
  const void* ptrs[] = {buffer, buffer, buffer, buffer};
  Bindings b;
  b.alignment = classes;
  b.pointers = ptrs;
  b.workspace = buffer;
  KernelArgs main_args, copy_args, unstage_args;
  fam().kernel_args(*p, c, b, main_args);
  REQUIRE(main_args.count() == 5);  // Args, workspace, x's copy, w's copy, y staged
  CHECK(*static_cast<void**>(main_args.pointers()[1]) == static_cast<void*>(buffer));
  CHECK(*static_cast<void**>(main_args.pointers()[2]) == static_cast<void*>(buffer + o.x));
  CHECK(*static_cast<void**>(main_args.pointers()[3]) == static_cast<void*>(buffer + o.w));
  CHECK(*static_cast<void**>(main_args.pointers()[4]) == static_cast<void*>(buffer + o.y));
  fam().step_args(*p, c, 0, b, copy_args);
  REQUIRE(copy_args.count() == 3);
  CHECK(*static_cast<void**>(copy_args.pointers()[1]) == static_cast<void*>(buffer + o.x));
  CHECK(*static_cast<void**>(copy_args.pointers()[2]) == static_cast<void*>(buffer + o.w));
  fam().step_args(*p, c, 1, b, unstage_args);
  REQUIRE(unstage_args.count() == 2);
  CHECK(*static_cast<void**>(unstage_args.pointers()[1]) == static_cast<void*>(buffer + o.y));
  KernelArgs main28;
  fam().kernel_args(*p28, c28, b, main28);
  REQUIRE(main28.count() == 5);
  CHECK(*static_cast<void**>(main28.pointers()[4]) == nullptr);  // y not staged
  // Any row length (repack 2's plan refuses rows of 6003 positions, repack 3 cuts them in 94 pieces of 64,
  // the last of 51; 64 float32 channels are two row tiles of 32; w's 64 x 64 rows of 9 taps 19 tiles of 7 x
  // 32 rows); y staged only with K a multiple of the chunk; no min_blocks rule; x, w or y off 16 bytes: slot
  // 1, repack 1 of the same tiles.
  auto odd = problem({{"dtype", "float32"},
                      {"n", "1"},
                      {"c", "64"},
                      {"h", "3"},
                      {"w", "2001"},
                      {"k", "64"},
                      {"r", "3"},
                      {"padding", "1"},
                      {"precision", "tf32"}});
  Config o3{{"algo", 1},    {"mma", 1},        {"tile_m", 64}, {"tile_n", 64}, {"tile_k", 32}, {"warps_m", 1},
            {"warps_n", 1}, {"min_blocks", 1}, {"stages", 4},  {"split_k", 1}, {"repack", 3}};
  CHECK(templates::conv2d::kernel_limits(as_conv(*odd), with_fronts(o3), hopper) == "");
  Config o2 = o3;
  o2.set("repack", 2);
  CHECK(templates::conv2d::kernel_limits(as_conv(*odd), with_fronts(o2), hopper)
            .find("repack 2 copies whole rows of 6003 positions") == 0);
  CHECK(d::repack3_tiles(as_conv(*odd)) == 2 * 94 + 19);
  // Rows of 65 to 256 positions whole, 32 bytes of channels a tile: 3 x 24 float16 rows of 100 in 5 tiles (the
  // last of 8 rows; cut in pieces of 50 they were 2 x 2), w's 40 x 24 rows of 9 in 3; 3 x 12 float32 rows of 256
  // in 5 and w's 36 x 12 rows of 81 taps (9x9) in 54 (they were 4 pieces x 2 and 2 pieces x 14).
  auto narrow16 = problem({{"dtype", "float16"}, {"n", "3"}, {"c", "24"}, {"h", "10"}, {"w", "10"}, {"k", "40"},
                           {"r", "3"}, {"padding", "1"}});
  CHECK(d::repack3_tiles(as_conv(*narrow16)) == 5 + 3);
  auto narrow32 = problem({{"dtype", "float32"}, {"n", "3"}, {"c", "12"}, {"h", "16"}, {"w", "16"}, {"k", "36"},
                           {"r", "9"}, {"padding", "4"}, {"precision", "tf32"}});
  CHECK(d::repack3_tiles(as_conv(*narrow32)) == 5 + 54);
  auto f16_3x3 = [](const char* n, const char* c, const char* h, const char* w, const char* k) {
    return problem({{"dtype", "float16"},
                    {"n", n},
                    {"c", c},
                    {"h", h},
                    {"w", w},
                    {"k", k},
                    {"r", "3"},
                    {"padding", "1"}});
  };
  CHECK(d::repack2_check(as_conv(*f16_3x3("4", "64", "7", "7", "60")), with_fronts(o3))
            .find("repack 3 stages y channels last where P * Q = 49") == 0);
  CHECK(d::repack2_check(as_conv(*f16_3x3("1", "8", "8192", "4097", "8")), with_fronts(o3))
            .find("repack 3 indexes a tile of 64 channels x H * W = 33562624 positions in 32 bits") == 0);
  const void* off_ptrs[] = {buffer + 2, buffer, buffer, buffer};
  b.pointers = off_ptrs;
  CHECK(fam().variant(*p, c, b) == 1);
  CHECK(fam().variant_config(*p, c, 1, hopper).at("repack") == 1);
  // Tuned beside repack 1 and 2 on sm_90, where 64 x 64 tiles make a wave (not N1 C = K = 256 14x14: 16 tiles).
  auto n1 = problem({{"dtype", "float16"}, {"n", "1"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"},
                     {"r", "3"}, {"padding", "1"}});
  Config c1 = c;
  c1.set("tile_n", 128), c1.set("warps_n", 1);
  CHECK(fam().validate(*n1, c1, hopper).find("repack 3 (three launches) where 64 x 64 output tiles number 16") == 0);
  std::size_t pruned = 0, threes = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *p, hopper, pruned)) threes += x.at("algo") == 1 && x.at("repack") == 3;
  CHECK(threes >= 8);
  // NVRTC: the main kernel (float16 staged, TF32 not staged, a residual epilogue on mma.sync for sm_80) and every
  // step (the copy's three tile forms: rows whole in groups, whole 8 words of channels a tile, cut), without
  // spilling.
  Compiler compiler;
  require_compiles(compiler, *p, c, hopper);
  auto res = problem({{"dtype", "bfloat16"}, {"n", "8"}, {"c", "64"}, {"h", "7"}, {"w", "7"}, {"k", "96"},
                      {"r", "3"}, {"padding", "1"}, {"bias", "1"}, {"epilogue", "y = max(acc + r, 0.0f)"}});
  Config r3{{"algo", 1}, {"mma", 0}, {"tile_m", 64}, {"tile_n", 32}, {"tile_k", 32}, {"warps_m", 2},
            {"warps_n", 1}, {"min_blocks", 1}, {"stages", 4}, {"split_k", 1}, {"repack", 3}};
  r3 = with_fronts(r3);
  CHECK(require_compiles(compiler, *res, r3, ampere).find(", 1, 1, jitune_conv_epilogue>") != std::string::npos);
  auto tf = problem({{"dtype", "float32"}, {"precision", "tf32"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"},
                     {"k", "64"}, {"r", "3"}, {"padding", "1"}});
  Config t3 = fam().heuristic(*tf, hopper);
  REQUIRE(t3.at("repack") != 0);
  t3.set("repack", 3);
  require_compiles(compiler, *tf, t3, hopper);
  REQUIRE(templates::conv2d::kernel_limits(as_conv(*narrow32), with_fronts(o3), hopper) == "");
  for (const auto& [q, cfg, dev] :
       {std::tuple{p.get(), c, hopper}, std::tuple{res.get(), r3, ampere}, std::tuple{tf.get(), t3, hopper},
        std::tuple{narrow32.get(), with_fronts(o3), hopper}})
    for (const StepKernel& step : fam().steps(*q, cfg, dev)) {
      const CompiledProgram out = compiler.compile(step.source.program, {step.source.name_expression}, dev.arch(), true);
      INFO(step.source.name_expression << "\n" << out.log);
      REQUIRE(out.ok);
      CHECK_FALSE(out.resources.at(0).spills());
    }
}

TEST_CASE("NCHW 1x1 of stride 1 through cp.async in place (pixel-major A): rules, default, variant, NVRTC") {
  const DeviceInfo hopper = nominal_device(90), ampere = nominal_device(80);
  auto one = [](const char* h, const char* w, const char* c, std::map<std::string, std::string> more = {}) {
    std::map<std::string, std::string> o{{"dtype", "float16"}, {"n", "32"}, {"c", c},  {"h", h},
                                         {"w", w},             {"k", "64"}, {"r", "1"}};
    for (auto& [k, v] : more) o[k] = v;
    return problem(o);
  };
  // The sm_90 implicit-GEMM default of a layer read as pixel runs: wgmma, 3 cp.async stages, legal (the family's
  // default where H * W is a multiple of 8 and w fits the shared memory is algo 6, its own test below).
  auto pixel_runs_default = [&](const Problem& q) {
    const Config c = templates::conv2d::detail::igemm_heuristic(as_conv(q), hopper);
    INFO(q.signature(), " -> ", c.text());
    CHECK(c.at("algo") == 1);
    CHECK(c.at("mma") == 1);
    CHECK(c.at("stages") == 3);
    CHECK(fam().validate(q, c, hopper).empty());
    return c;
  };
  auto p = one("56", "56", "256");
  // The default on sm_90: wgmma, the cp.async pipeline over x in place (no repack); mma.sync through registers on
  // sm_80, where the pixel-major operand does not exist.
  const Config h = pixel_runs_default(*p);
  CHECK(h.at("repack") == 0);
  CHECK(fam().prep(*p, h).workspace_bytes == 0);
  // An expansion of 64 channels (C * R * S = 64) too: pixel runs on wgmma rather than the direct kernel.
  auto expand = one("56", "56", "64", {{"k", "256"}});
  const Config he = pixel_runs_default(*expand);
  CHECK(he.at("tile_n") == 128);
  CHECK(templates::conv2d::detail::igemm_heuristic(as_conv(*expand), ampere).at("stages") == 0);
  // Small layers too (the neighbourhood keeps no other implicit GEMM there): 64-pixel tiles, split-K where the
  // tiles are few and the reduction long; K or N * P * Q of 32 or less (no legal 64 x 64 tile): registers.
  for (auto [n, h, c, k, split] : {std::array<std::int64_t, 5>{1, 14, 256, 64, 1}, {1, 14, 1024, 256, 2},
                                   {3, 4, 512, 128, 2}}) {
    auto q = one(std::to_string(h).c_str(), std::to_string(h).c_str(), std::to_string(c).c_str(),
                 {{"n", std::to_string(n)}, {"k", std::to_string(k)}});
    const Config hq = pixel_runs_default(*q);
    INFO(q->signature(), " -> ", hq.text());
    CHECK(hq.at("repack") == 0);
    CHECK(hq.at("tile_m") == 64);
    CHECK(hq.at("split_k") == split);
  }
  for (auto [n, h, k] : {std::array<std::int64_t, 3>{1, 4, 64}, {4, 14, 32}}) {
    auto q = one(std::to_string(h).c_str(), std::to_string(h).c_str(), "256",
                 {{"n", std::to_string(n)}, {"k", std::to_string(k)}});
    const Config hq = fam().heuristic(*q, hopper);
    INFO(q->signature(), " -> ", hq.text());
    CHECK(hq.at("algo") == 1);
    CHECK(hq.at("stages") == 0);
    CHECK(fam().validate(*q, hq, hopper).empty());
  }
  // Its one stage of 64 channels fills one of the 3 buffers: the block allocates that one (or the output's staging,
  // if larger: 128 channels x 136 halves), not three; the 256-channel layer fills all 3 of its 4 stages' buffers.
  CHECK(fam().launch_shape(*expand, he, hopper).shared_bytes == 128 * 136 * 2 + 1024);
  CHECK(fam().launch_shape(*p, h, hopper).shared_bytes == 3 * (128 + 64) * 64 * 2 + 1024);
  CHECK(templates::conv2d::detail::igemm_heuristic(as_conv(*p), ampere).at("stages") == 0);
  // H * W even is enough (runs of 8, 4 or 2 pixels inside one image); odd, padded, strided or larger filters are
  // refused with the reason, and so are mma.sync and C off 8.
  CHECK(fam().validate(*one("14", "14", "256"), h, hopper).empty());
  CHECK(fam().validate(*one("15", "18", "256"), h, hopper).empty());
  auto why = [&](const Problem& q, std::initializer_list<std::pair<const char*, std::int64_t>> changes) {
    Config x = h;
    for (auto [name, value] : changes) x.set(name, value);
    return fam().validate(q, x, hopper);
  };
  CHECK(why(*one("7", "7", "256"), {}).find("H * W = 49 is odd") != std::string::npos);
  CHECK(why(*one("56", "56", "256", {{"padding", "1"}}), {}).find("padding 1x1") != std::string::npos);
  CHECK(why(*one("56", "56", "256", {{"stride", "2"}}), {}).find("stride 2x2") != std::string::npos);
  CHECK(why(*one("56", "56", "256", {{"r", "3"}}), {}).find("a 3x3 filter") != std::string::npos);
  CHECK(why(*one("56", "56", "252"), {}).find("C a multiple of 8 (C = 252)") != std::string::npos);
  CHECK(why(*p, {{"mma", 0}, {"warps_m", 2}, {"warps_n", 2}, {"tile_m", 128}, {"tile_n", 64}})
            .find("feeds wgmma a pixel-major operand: mma 1") != std::string::npos);
  // Channels last is unaffected; the pipeline's legal candidates on the NCHW 1x1 are all wgmma.
  CHECK(fam().validate(*one("56", "56", "256", {{"layout", "nhwc"}}), h, hopper).empty());
  // The tuned neighbourhood there: the implicit GEMM only as pixel runs (no register stages, no repack).
  std::size_t pruned = 0, in_place = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *p, hopper, pruned))
    if (x.at("algo") == 1) {
      CHECK(x.at("stages") > 0);
      CHECK(x.at("repack") == 0);
      CHECK(x.at("mma") == 1);
      ++in_place;
    }
  CHECK(in_place >= 4);
  Config staged = h;
  staged.set("stages", 0);
  CHECK(fam().validate(*p, staged, hopper).find("stages 0 where the NCHW 1x1 is read in place as pixel runs") !=
        std::string::npos);
  CHECK(templates::conv2d::kernel_limits(as_conv(*p), staged, hopper).empty());  // a hard limit it is not
  // w off 16 bytes (x below): the same tiles through registers (variant 1), legal.
  const std::uint8_t classes[] = {16, 2, 16, 16};
  const void* ptrs[] = {nullptr, nullptr, nullptr, nullptr};
  Bindings b;
  b.pointers = ptrs;
  b.alignment = classes;
  REQUIRE(fam().variant(*p, h, b) == 1);
  CHECK(templates::conv2d::kernel_limits(as_conv(*p), fam().variant_config(*p, h, 1, hopper), hopper).empty());
  // 14 x 14 images: x's rows are 28 bytes (alignment class 4) but runs are sized by H * W, so only the pointer
  // counts: aligned, the pipeline (variant 0); 8 bytes off, registers. w off 16 bytes: registers.
  auto small = one("14", "14", "1024", {{"k", "256"}});
  const Config hs = fam().heuristic(*small, hopper);
  REQUIRE(hs.at("stages") > 0);
  alignas(16) static const std::byte block[32] = {};
  const std::uint8_t rows4[] = {4, 16, 16, 16}, w_off[] = {16, 8, 16, 16};
  const void* aligned_ptrs[] = {block, block, nullptr, block};
  const void* off_ptrs[] = {block + 8, block, nullptr, block};
  Bindings bs;
  bs.alignment = rows4;
  bs.pointers = aligned_ptrs;
  CHECK(fam().variant(*small, hs, bs) == 0);
  bs.pointers = off_ptrs;
  CHECK(fam().variant(*small, hs, bs) == 1);
  bs.pointers = aligned_ptrs;
  bs.alignment = w_off;
  CHECK(fam().variant(*small, hs, bs) == 1);
  // NVRTC: both 16-bit types, tiles of one and two warpgroups, 64 and 128 channels, split-K, bias and an epilogue.
  Compiler compiler;
  std::size_t compiled = 0;
  for (const char* dtype : {"float16", "bfloat16"}) {
    auto q = one("14", "14", "1024", {{"dtype", dtype}, {"k", "256"}, {"bias", "1"},
                                       {"epilogue", "y = max(acc + r, 0.0f)"}});
    for (auto [tm, tn, wm, stages, split] : {std::array<std::int64_t, 5>{128, 128, 2, 4, 1}, {64, 64, 1, 3, 2},
                                              {64, 128, 1, 8, 1}}) {
      Config c = h;
      c.set("tile_m", tm), c.set("tile_n", tn), c.set("warps_m", wm), c.set("stages", stages), c.set("split_k", split);
      INFO(dtype, " ", c.text());
      require_compiles(compiler, *q, c, hopper);
      ++compiled;
    }
  }
  CHECK(compiled == 6);
}

TEST_CASE("persist 1: the NCHW 1x1 pixel-run pipeline in one balanced wave of tile-taking blocks; rules, NVRTC") {
  const DeviceInfo hopper = nominal_device(90);
  auto one = [](const char* c, const char* k, std::map<std::string, std::string> more = {}) {
    std::map<std::string, std::string> o{{"dtype", "float16"}, {"n", "32"}, {"c", c},  {"h", "56"},
                                         {"w", "56"},          {"k", k},    {"r", "1"}};
    for (auto& [key, v] : more) o[key] = v;
    return problem(o);
  };
  auto expand = one("64", "256");
  Config c = templates::conv2d::detail::igemm_heuristic(as_conv(*expand), hopper);
  REQUIRE(c.at("stages") == 3);
  CHECK(c.at("persist") == 0);  // the default is not persistent
  c.set("tile_m", 64), c.set("warps_m", 1), c.set("tile_n", 64), c.set("persist", 1);
  CHECK(fam().validate(*expand, c, hopper).empty());
  // The ring keeps all its stages (the next tile's copies land while this one is stored) and the tile is staged in
  // its own region past them: 3 x (64 + 64) x 64 halves + 64 channels x 72 halves + the 1024-byte alignment.
  const LaunchShape shape = fam().launch_shape(*expand, c, hopper);
  CHECK(shape.shared_bytes == 3 * 128 * 64 * 2 + 64 * 72 * 2 + 1024);
  CHECK(shape.balance_units == 32 * 56 * 56 / 64 * 4);  // every output tile, shared out at load
  CHECK(shape.grid.y == 1);
  CHECK(shape.grid.z == 1);
  Config plain = c;
  plain.set("persist", 0);
  CHECK(fam().launch_shape(*expand, plain, hopper).balance_units == 0);
  // Only the pixel-run pipeline without split-K; the reason names what to change.
  auto why = [&](const Problem& q, std::initializer_list<std::pair<const char*, std::int64_t>> changes) {
    Config x = c;
    for (auto [name, value] : changes) x.set(name, value);
    return fam().validate(q, x, hopper);
  };
  CHECK(why(*one("256", "64"), {{"split_k", 2}}).find("persist 1 runs the NCHW 1x1 pixel-run pipeline") !=
        std::string::npos);
  CHECK(why(*one("64", "256", {{"layout", "nhwc"}}), {}).find("persist 1") != std::string::npos);
  CHECK(why(*one("64", "256", {{"r", "3"}, {"padding", "1"}}), {{"repack", 1}, {"stages", 4}}).find("persist 1") !=
        std::string::npos);
  // A misaligned call runs the same tiles through registers (variant 1), which is never persistent.
  const Config v = fam().variant_config(*expand, c, 1, hopper);
  CHECK(v.at("persist") == 0);
  CHECK(templates::conv2d::kernel_limits(as_conv(*expand), v, hopper).empty());
  // The tuner offers both values where the pipeline applies, and only 0 elsewhere.
  std::size_t pruned = 0, persistent = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *expand, hopper, pruned)) persistent += x.at("persist");
  CHECK(persistent >= 4);
  for (const Config& x : tuner::legal_candidates(fam(), *one("64", "64", {{"r", "3"}, {"padding", "1"}}), hopper,
                                                  pruned))
    CHECK(x.at("persist") == 0);
  // NVRTC: both 16-bit types, one and two warpgroups, 64 and 128 channels, 3 to 8 stages, bias and an epilogue,
  // a reduction of several stages a tile and runs of 4 pixels (14 x 14 maps), all without spilling.
  Compiler compiler;
  std::size_t compiled = 0;
  for (const char* dtype : {"float16", "bfloat16"})
    for (auto [cin, h, tm, tn, wm, stages] : {std::array<std::int64_t, 6>{64, 56, 64, 64, 1, 3},
                                              {1024, 14, 128, 128, 2, 4}, {256, 56, 64, 128, 1, 8}}) {
      auto q = one(std::to_string(cin).c_str(), "256",
                   {{"dtype", dtype}, {"h", std::to_string(h)}, {"w", std::to_string(h)}, {"bias", "1"},
                    {"epilogue", "y = max(acc + r, 0.0f)"}});
      Config x = c;
      x.set("tile_m", tm), x.set("tile_n", tn), x.set("warps_m", wm), x.set("stages", stages);
      INFO(dtype, " ", x.text());
      CHECK(require_compiles(compiler, *q, x, hopper).find(", 1, jitune_conv_epilogue>") != std::string::npos);
      ++compiled;
    }
  CHECK(compiled == 6);
}

TEST_CASE("channels last: the layout is part of the problem, runs only on the implicit GEMM, says so otherwise") {
  const DeviceInfo dev = nominal_device(90);
  auto nhwc = [](const char* dtype, const char* c) {
    return problem({{"dtype", dtype}, {"n", "2"}, {"c", c}, {"h", "20"}, {"w", "18"}, {"k", "24"}, {"r", "3"},
                    {"padding", "1"}, {"layout", "nhwc"}});
  };
  auto f16 = nhwc("float16", "40");  // C * R * S = 360: the implicit GEMM's default
  CHECK(f16->signature().find(";layout=nhwc;") != std::string::npos);
  CHECK(fam().parse_problem(f16->signature())->signature() == f16->signature());
  CHECK(f16->group() == "float16|nhwc|f=3x3|st=1x1|d=1x1");
  // Stored shapes, channels innermost.
  const auto bufs = fam().buffers(*f16);
  CHECK(bufs[0].shape == std::vector<std::int64_t>{2, 20, 18, 40});
  CHECK(bufs[1].shape == std::vector<std::int64_t>{24, 3, 3, 40});
  CHECK(bufs[3].shape == std::vector<std::int64_t>{2, 20, 18, 24});
  // Channels last takes the tensor cores: the direct kernel reads NCHW only.
  const Config h = fam().heuristic(*f16, dev);
  CHECK(h.at("algo") == 1);
  CHECK(fam().validate(*f16, h, dev).empty());
  Config direct = h;
  direct.set("algo", 0);
  direct = fam().space().canonical(direct);
  CHECK(fam().validate(*f16, direct, dev).find("reads NCHW; channels last runs on the implicit GEMM") !=
        std::string::npos);
  // float32 channels last has no kernel: the check names both reasons' fix.
  CHECK(h.at("stages") == 3);  // eight channels per tap: the cp.async pipeline
  Config pipelined = h;
  auto odd = nhwc("float16", "36");
  CHECK(fam().heuristic(*odd, dev).at("stages") == 0);
  CHECK(fam().validate(*odd, pipelined, dev).find("C a multiple of 8 (C = 36)") != std::string::npos);
  for (std::int64_t stages : {2, 4}) {
    pipelined.set("stages", stages);
    CHECK(fam().validate(*f16, pipelined, dev).empty());
  }
  // Register staging runs there (the variant for misaligned pointers) but is off the tuned neighbourhood.
  pipelined.set("stages", 0);
  CHECK(templates::conv2d::kernel_limits(as_conv(*f16), pipelined, dev).empty());
  CHECK(fam().validate(*f16, pipelined, dev).find("stages 0 where the cp.async pipeline applies") != std::string::npos);
  // Pointers less than 16-byte aligned (x or w) run the register-staged kernel of the same tiles (slot 1).
  const std::uint8_t aligned[] = {16, 16, 0, 16}, skewed_x[] = {2, 16, 0, 16}, skewed_w[] = {16, 8, 0, 16},
                     skewed_y[] = {16, 16, 0, 2};
  Bindings b;
  for (auto [classes, slot] : {std::pair{aligned, 0}, {skewed_x, 1}, {skewed_w, 1}, {skewed_y, 0}}) {
    b.alignment = std::span<const std::uint8_t>(classes, 4);
    CHECK(fam().variant(*f16, h, b) == slot);
  }
  const Config fallback = fam().variant_config(*f16, h, 1, dev);
  CHECK(fallback.at("stages") == 0);
  CHECK(fallback.at("tile_m") == h.at("tile_m"));
  CHECK(templates::conv2d::kernel_limits(as_conv(*f16), fallback, dev).empty());
  b.alignment = std::span<const std::uint8_t>(skewed_x, 4);
  CHECK(fam().variant(*f16, fallback, b) == 0);  // already register-staged
  // float32 channels last: Winograd (algo 3, or F(4x4), algo 4) for 3x3 of stride 1; other filters have no kernel,
  // and the check names what does run channels last.
  auto f32 = nhwc("float32", "40");
  CHECK(fam().heuristic(*f32, dev).at("algo") == 3);
  std::size_t pruned = 0;
  for (const Config& x : tuner::legal_candidates(fam(), *f32, dev, pruned))
    CHECK((x.at("algo") == 3 || x.at("algo") == 4));
  auto f32_5x5 = problem({{"dtype", "float32"}, {"n", "2"}, {"c", "40"}, {"h", "20"}, {"w", "18"}, {"k", "24"},
                          {"r", "5"}, {"padding", "1"}, {"layout", "nhwc"}});
  const std::string why_5x5 = fam().check(*f32_5x5, fam().heuristic(*f32_5x5, dev), dev);
  CHECK(why_5x5.find("channels last runs on the implicit GEMM") != std::string::npos);
  CHECK(why_5x5.find("Winograd (algo 3: float32 3x3") != std::string::npos);
  CHECK(tuner::legal_candidates(fam(), *f32_5x5, dev, pruned).empty());
  CHECK_THROWS_WITH_AS(problem({{"dtype", "float16"}, {"c", "4"}, {"h", "8"}, {"w", "8"}, {"k", "4"}, {"r", "3"},
                                {"layout", "chwn"}}),
                       doctest::Contains("not nchw or nhwc"), InvalidArgument);
  // The CPU reference reads channels last: one output element against the definition.
  const Workload w = fam().workload(*f16, 3);
  const auto out = fam().reference(*f16, w)[0];
  const std::int64_t n = 1, k = 5, oy = 0, ox = 17;  // padding row and column
  double want = 0;
  for (std::int64_t c = 0; c < 40; ++c)
    for (std::int64_t r = 0; r < 3; ++r)
      for (std::int64_t t = 0; t < 3; ++t) {
        const std::int64_t iy = oy - 1 + r, ix = ox - 1 + t;
        if (iy < 0 || iy >= 20 || ix < 0 || ix >= 18) continue;
        want += load_element(DType::kFloat16, w.inputs[0].data(), static_cast<std::uint64_t>(((n * 20 + iy) * 18 + ix) * 40 + c)) *
                load_element(DType::kFloat16, w.inputs[1].data(), static_cast<std::uint64_t>(((k * 3 + r) * 3 + t) * 40 + c));
      }
  const double got = load_element(DType::kFloat16, out.data(), static_cast<std::uint64_t>(((n * 20 + oy) * 18 + ox) * 24 + k));
  CHECK(got == doctest::Approx(want).epsilon(2e-3));
}

TEST_CASE("tolerances grow with the number of summed products") {
  auto small = problem({{"dtype", "float32"}, {"c", "1"}, {"h", "4"}, {"w", "4"}, {"k", "1"}, {"r", "1"}});
  auto big = problem({{"dtype", "float32"}, {"c", "64"}, {"h", "4"}, {"w", "4"}, {"k", "1"}, {"r", "3"}});
  CHECK(fam().output_check(*small, 0).atol < fam().output_check(*big, 0).atol);
  CHECK(fam().output_check(*big, 0).atol < 1e-2);
  CHECK(fam().output_check(*big, 0).rtol == 1e-5);
}

// Configs within the kernel's limits that together use every value of every knob (for compile and GPU tests).
static std::vector<Config> covering_sample(const templates::conv2d::ConvProblem& p, const DeviceInfo& dev,
                                           std::size_t extra) {
  std::set<std::pair<std::string, std::int64_t>> seen;
  std::vector<Config> sample = test::conv2d_knob_sample(p, dev, -1, seen);
  const std::vector<Config> all = fam().space().enumerate();
  for (std::size_t i = 0, n = 0; n < extra && i < all.size(); i += 4999)
    if (templates::conv2d::kernel_limits(p, all[i], dev).empty()) sample.push_back(all[i]), ++n;
  return sample;
}

// Compiles every config of `sample` through the tuner's compile pool: each must compile and use registers, and with
// `no_spills` not spill (the tuner rejects spilling candidates unrun). Returns how many compiled.
static std::size_t compile_sample(Compiler& compiler, const Problem& p, const std::vector<Config>& sample,
                                  const DeviceInfo& dev, bool no_spills) {
  tuner::CompilePool pool(compiler, fam(), p, sample, dev.arch(), 0, true);
  std::size_t compiled = 0;
  while (auto batch = pool.next())
    for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
      INFO(p.signature(), " ", sample[batch->candidates[b]].text(), "\n", batch->output->log);
      REQUIRE(batch->output->ok);
      const auto& res = batch->output->resources.at(batch->unit[b]);
      CHECK(res.registers > 0);
      if (no_spills) CHECK_FALSE(res.spills());
      ++compiled;
    }
  return compiled;
}

TEST_CASE("NVRTC compiles configs covering every knob value, for sm_80 and sm_90") {
  Compiler compiler;
  for (int cc : {80, 90})
    for (auto [dtype, layout] : {std::pair{"float32", "nchw"}, {"float16", "nchw"}, {"float16", "nhwc"}}) {
      // C = 96 divides by every c_stage and gives split_k 8 a stage per split at tile_k 16.
      auto p = problem({{"dtype", dtype},
                        {"n", "2"},
                        {"c", "96"},
                        {"h", "30"},
                        {"w", "64"},
                        {"k", "96"},
                        {"r", "3"},
                        {"padding", "1"},
                        {"bias", "1"},
                        {"layout", layout}});
      const DeviceInfo dev = nominal_device(cc);
      const std::vector<Config> sample = covering_sample(as_conv(*p), dev, 4);
      std::set<std::pair<std::string, std::int64_t>> seen;
      for (const Config& c : sample)
        for (const auto& [name, value] : c.values()) seen.insert({name, value});
      for (const Param& param : fam().space().params())
        for (std::int64_t value : param.values) {
          INFO(param.name, "=", value);
          const bool too_wide =
              param.name == "load" && value * static_cast<std::int64_t>(dtype_size(parse_dtype(dtype))) > 16;
          // float32 runs only the direct kernel: algo 1's knobs stay at their first values.
          const bool tensor_cores_only = std::string_view(dtype) == "float32" &&
                                         ((param.name == "algo" && value == 1) ||
                                          (param.when == "algo" && param.varies_under(1) && value != param.values.front()));
          // The direct kernel reads NCHW only; repack 1 and 2 copy NCHW to channels last.
          const bool nhwc = std::string_view(layout) == "nhwc";
          const bool nchw_only = nhwc && param.name == "repack" && value >= 1;
          const bool direct_only = nhwc && ((param.name == "algo" && value == 0) ||
                                            (param.when == "algo" && param.varies_under(0) && value != param.values.front()));
          // C * R * S = 864 is beyond the tensor-core direct kernel's filter registers (its own test below).
          const bool short_reduction_only =
              (param.name == "algo" && value == 2) || (param.when == "algo" && param.varies_under(2) && value != param.values.front());
          // Winograd (algo 3, 4 and 5) takes float32 only.
          const bool float32_only = std::string_view(dtype) != "float32" &&
                                    ((param.name == "algo" && value >= 3) ||
                                     (param.when == "algo" && param.varies_under(3) && value != param.values.front()));
          // wgmma (mma 1) is sm_90's only.
          const bool sm90_only = cc != 90 && param.name == "mma" && value == 1;
          // persist 1 runs only an NCHW 1x1 read as pixel runs (its own test above); this layer is 3x3. So does the
          // streaming GEMM (algo 6, whose alone tile_n 256 is: its own test).
          const bool pixel_runs_only = (param.name == "persist" && value == 1) ||
                                       (param.name == "algo" && value == 6) || (param.name == "tile_n" && value == 256);
          CHECK(seen.count({param.name, value}) == (too_wide || tensor_cores_only || direct_only ||
                                                            short_reduction_only || sm90_only || nchw_only ||
                                                            float32_only || pixel_runs_only
                                                        ? 0u
                                                        : 1u));
        }
      INFO("sm_", cc, " ", dtype, " ", layout, ": ", sample.size(), " configs");
      REQUIRE(sample.size() >= (std::string_view(layout) == "nhwc" ? 6u : 12u));
      tuner::CompilePool pool(compiler, fam(), *p, sample, dev.arch(), 0, true);
      std::size_t compiled = 0;
      while (auto batch = pool.next())
        for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
          INFO(sample[batch->candidates[b]].text(), "\n", batch->output->log);
          REQUIRE(batch->output->ok);
          CHECK(batch->output->resources.at(batch->unit[b]).registers > 0);
          ++compiled;
        }
      CHECK(compiled == sample.size());
    }
}

TEST_CASE("NVRTC compiles the tensor-core direct kernel (algo 2) over every knob value, for sm_80 and sm_90") {
  Compiler compiler;
  // NCHW with 5 channels (one padded chunk a pixel) and K = 37 (every n_block); channels last with C = 16 (the
  // cp.async fill), strides and dilations; an odd chunk count (C = 3, 5 x 5: the zero chunk).
  const char* signatures[] = {
      "bias=1;c=5;dilation_h=1;dilation_w=1;dtype=float16;h=40;k=37;layout=nchw;n=2;pad_h=1;pad_w=1;r=3;s=2;"
      "stride_h=1;stride_w=1;w=70",
      "bias=0;c=16;dilation_h=1;dilation_w=2;dtype=bfloat16;h=33;k=16;layout=nhwc;n=1;pad_h=1;pad_w=2;r=3;s=3;"
      "stride_h=2;stride_w=1;w=70",
      "bias=1;c=3;dilation_h=2;dilation_w=2;dtype=float16;h=50;k=8;layout=nchw;n=1;pad_h=0;pad_w=3;r=5;s=5;"
      "stride_h=1;stride_w=2;w=90"};
  for (int cc : {80, 90})
    for (const char* signature : signatures) {
      auto p = fam().parse_problem(signature);
      const DeviceInfo dev = nominal_device(cc);
      std::set<std::pair<std::string, std::int64_t>> seen;
      const std::vector<Config> sample = test::conv2d_knob_sample(as_conv(*p), dev, 2, seen);
      for (const Param& param : fam().space().params())
        if (param.when == "algo" && param.varies_under(2))
          for (std::int64_t value : param.values) {
            INFO(signature, " ", param.name, "=", value);
            // K = 16 (C * R * S = 144) allows n_block 8 or 16 on the second problem; K = 8 only 8 and Q = 44
            // no 128 columns on the third; the first allows every value.
            const bool second = signature == signatures[1], third = signature == signatures[2];
            const bool refused = (param.name == "n_block" && ((second && value > 16) || (third && value > 8))) ||
                                 (third && param.name == "cols" && value == 128);
            CHECK(seen.count({param.name, value}) == (refused ? 0u : 1u));
          }
      REQUIRE(sample.size() >= 4u);
      CHECK(compile_sample(compiler, *p, sample, dev, false) == sample.size());
    }
}

TEST_CASE("the tensor-core direct kernel's limits: filter registers, tile shapes, dtype; its default where C * R * S is short") {
  const DeviceInfo dev = nominal_device(90);
  auto f16 = problem({{"dtype", "float16"}, {"c", "16"}, {"h", "512"}, {"w", "512"}, {"k", "16"}, {"r", "3"}});
  const Config h = fam().heuristic(*f16, dev);
  CHECK(h.at("algo") == 2);
  CHECK(h.at("n_block") == 16);
  CHECK(fam().check(*f16, h, dev).empty());
  const auto g = templates::conv2d::detail::tcd_geometry(as_conv(*f16), h);
  CHECK(g.chunks == 2);
  CHECK(g.pitch == 3);  // odd: eight pixels' chunks on distinct banks
  CHECK(g.steps == 9);
  CHECK(g.filter_registers == 36);
  // 64 channels a block at C * R * S = 144 would keep 144 filter registers.
  Config wide = h;
  wide.set("n_block", 64);
  auto k64 = problem({{"dtype", "float16"}, {"c", "16"}, {"h", "64"}, {"w", "64"}, {"k", "64"}, {"r", "3"}});
  CHECK(templates::conv2d::kernel_limits(as_conv(*k64), wide, dev).find("filter registers") != std::string::npos);
  // Three channels (five of eight staged channels padding) keep the direct kernel; long reductions the implicit
  // GEMM.
  auto c3 = problem({{"dtype", "float16"}, {"c", "3"}, {"h", "224"}, {"w", "224"}, {"k", "16"}, {"r", "3"}});
  CHECK(fam().heuristic(*c3, dev).at("algo") == 0);
  // A 1x1 over 256 channels is short (C * R * S = 256) but 32 chunks a pixel: the implicit GEMM (the streaming GEMM,
  // algo 6, only where K >= C).
  auto c256 = problem({{"dtype", "float16"}, {"c", "256"}, {"h", "56"}, {"w", "56"}, {"k", "64"}, {"r", "1"}});
  CHECK(fam().heuristic(*c256, dev).at("algo") == 1);
  auto long_red = problem({{"dtype", "float16"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"}, {"r", "3"}});
  CHECK(fam().heuristic(*long_red, dev).at("algo") != 2);
  // float32 and pre-Ampere devices never take it.
  auto f32 = problem({{"dtype", "float32"}, {"c", "16"}, {"h", "64"}, {"w", "64"}, {"k", "16"}, {"r", "3"}});
  CHECK(fam().heuristic(*f32, dev).at("algo") == 0);
  CHECK(templates::conv2d::kernel_limits(as_conv(*f32), h, dev).find("float16 or bfloat16") != std::string::npos);
  CHECK(templates::conv2d::kernel_limits(as_conv(*f16), h, nominal_device(75)).find("sm_80") != std::string::npos);
  // Uneven splits of the 16-pixel groups over warps x m_tiles, and n_block 32 or 48 shapes, are refused.
  Config uneven = h;
  uneven.set("rows", 1), uneven.set("cols", 16), uneven.set("warps", 2);
  CHECK(templates::conv2d::kernel_limits(as_conv(*f16), uneven, dev).find("evenly") != std::string::npos);
  // The default of a tiny output shrinks its tile to the image.
  auto tiny = problem({{"dtype", "bfloat16"}, {"c", "8"}, {"h", "9"}, {"w", "9"}, {"k", "3"}, {"r", "3"}});
  const Config t = fam().heuristic(*tiny, dev);
  CHECK(t.at("algo") == 2);
  CHECK(fam().check(*tiny, t, dev).empty());
}

TEST_CASE("the heuristics of the public cases and odd geometries compile without spilling") {
  Compiler compiler;
  const DeviceInfo dev = nominal_device(90);
  std::vector<std::string> signatures;
  for (const auto& [name, signature] : fam().default_suite()) signatures.push_back(signature);
  for (const char* extra :
       {"bias=1;c=5;dilation_h=2;dilation_w=2;dtype=float32;h=31;k=7;layout=nchw;n=3;pad_h=2;pad_w=2;r=7;"
        "s=7;stride_h=2;stride_w=2;w=29",
        "bias=0;c=2;dilation_h=1;dilation_w=3;dtype=bfloat16;h=40;k=12;layout=nchw;n=1;pad_h=0;pad_w=1;r=2;"
        "s=5;stride_h=1;stride_w=2;w=41",
        "bias=1;c=64;dilation_h=1;dilation_w=1;dtype=bfloat16;h=28;k=128;layout=nchw;n=4;pad_h=1;pad_w=1;r=3;"
        "s=3;stride_h=2;stride_w=2;w=28"})
    signatures.push_back(extra);
  for (const std::string& signature : signatures) {
    auto p = fam().parse_problem(signature);
    const Config h = fam().heuristic(*p, dev);
    const KernelSource src = fam().source(*p, h);
    CompiledProgram out = compiler.compile(src.program, {src.name_expression}, dev.arch(), true);
    INFO(signature, " ", h.text(), "\n", out.log);
    REQUIRE(out.ok);
    CHECK_FALSE(out.resources.at(0).spills());
  }
}

TEST_CASE("fused epilogue: problem, signature, buffers, errors, reference, and NVRTC compiles of every algo") {
  const std::map<std::string, std::string> base = {{"dtype", "float16"}, {"n", "2"}, {"c", "16"}, {"h", "9"},
                                                   {"w", "11"},          {"k", "16"}, {"r", "3"}, {"padding", "1"},
                                                   {"bias", "1"}};
  auto with = [&](std::string epilogue) {
    auto o = base;
    o["epilogue"] = std::move(epilogue);
    return o;
  };
  SUBCASE("the canonical text joins the signature after dtype and parses back; r adds a residual buffer") {
    auto p = problem(with("y=max(acc+r,0.0f)"));
    CHECK(p->signature() ==
          "bias=1;c=16;dilation_h=1;dilation_w=1;dtype=float16;epilogue=y = max ( acc + r , 0.0f );h=9;k=16;"
          "layout=nchw;n=2;pad_h=1;pad_w=1;r=3;s=3;stride_h=1;stride_w=1;w=11");
    CHECK(fam().parse_problem(p->signature())->signature() == p->signature());
    CHECK(p->group() == problem(base)->group());  // records without an epilogue serve it as the nearest problem
    CHECK(as_conv(*p).residual());
    const auto specs = fam().buffers(*p);
    REQUIRE(specs.size() == 5);
    CHECK(specs[4].name == "residual");
    CHECK(specs[4].shape == specs[3].shape);
    CHECK(specs[4].extent_bytes() == specs[3].extent_bytes());
    CHECK(p->bytes_moved() > problem(base)->bytes_moved() + specs[3].extent_bytes() - 1.0);
    auto relu = problem(with("y = max(acc, 0.0f)"));
    CHECK_FALSE(as_conv(*relu).residual());
    CHECK(fam().buffers(*relu)[4].extent_bytes() == 0);
    CHECK(problem(base)->signature().find("epilogue") == std::string::npos);
  }
  SUBCASE("bad epilogues say what is wrong") {
    CHECK_THROWS_WITH_AS(problem(with("y = acc + b")), doctest::Contains("reads 'b'"), InvalidArgument);
    CHECK_THROWS_WITH_AS(problem(with("y = acc + b")), doctest::Contains("bias argument"), InvalidArgument);
    CHECK_THROWS_WITH_AS(problem(with("y = r * 2")), doctest::Contains("does not read acc"), InvalidArgument);
    CHECK_THROWS_WITH_AS(problem(with("y = acc +")), doctest::Contains("conv2d epilogue"), InvalidArgument);
    CHECK_THROWS_WITH_AS(problem(with("y = acc; z = 1")), doctest::Contains("conv2d epilogue"), InvalidArgument);
  }
  SUBCASE("the reference applies the expression to acc rounded to the dtype and the residual") {
    for (const char* layout : {"nchw", "nhwc"}) {
      auto o = with("y = max(acc * 0.5f + r, 0.0f)");
      o["layout"] = layout;
      auto fused = problem(o);
      auto plain = problem([&] {
        auto q = base;
        q["layout"] = layout;
        return q;
      }());
      Workload w = fam().workload(*fused, 11);
      REQUIRE(w.inputs.size() == 4);  // x, w, bias, residual
      Workload wp = w;
      wp.inputs.pop_back();
      const auto got = fam().reference(*fused, w)[0];
      const auto conv = fam().reference(*plain, wp)[0];
      const std::size_t count = conv.size() / 2;
      std::size_t clamped = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const double want =
            std::max(load_element(DType::kFloat16, conv.data(), i) * 0.5 + load_element(DType::kFloat16, w.inputs[3].data(), i), 0.0);
        REQUIRE(load_element(DType::kFloat16, got.data(), i) ==
                load_element(DType::kFloat16, [&] {
                  std::vector<std::byte> one(2);
                  store_element(DType::kFloat16, one.data(), 0, want);
                  return one;
                }().data(), 0));
        clamped += want == 0.0;
      }
      CHECK(clamped > count / 8);  // the max() is exercised
      CHECK(clamped < count);
    }
  }
  SUBCASE("the program carries the functor and the kernel takes it as its last template argument") {
    auto p = problem(with("y = max(acc + r, 0.0f)"));
    auto plain = problem(base);
    const DeviceInfo dev = nominal_device(90);
    Compiler compiler;
    std::set<std::int64_t> seen_algos;
    for (const Config& c : covering_sample(as_conv(*p), dev, 0)) {  // every algo's source function
      const KernelSource src = fam().source(*p, c);
      CHECK(src.name_expression.ends_with(", jitune_conv_epilogue>"));
      CHECK(src.program.find("kResidual = true") != std::string::npos);
      const KernelSource without = fam().source(*plain, c);  // no epilogue: the kernel as before
      CHECK(without.program.find("jitune_conv_epilogue") == std::string::npos);
      CHECK(src.name_expression == without.name_expression.substr(0, without.name_expression.size() - 1) +
                                       ", jitune_conv_epilogue>");
      seen_algos.insert(c.at("algo"));
    }
    CHECK(seen_algos == std::set<std::int64_t>{0, 1, 2});
    CHECK(fam().source(*problem(with("y = max(acc, 0.0f)")), fam().heuristic(*p, dev)).program.find(
              "kResidual = false") != std::string::npos);
    // Every algo with an epilogue compiles for sm_80 and sm_90: covering samples of both layouts.
    for (int cc : {80, 90})
      for (const char* layout : {"nchw", "nhwc"}) {
        auto o = with("y = max(acc + r, 0.0f)");
        o["layout"] = layout;
        auto q = problem(o);
        const DeviceInfo d = nominal_device(cc);
        // One config per store path: algo, mma, register or cp.async stages, repack, split-K.
        std::vector<Config> sample;
        std::set<std::vector<std::int64_t>> paths;
        std::set<std::int64_t> algos;
        for (const Config& c : covering_sample(as_conv(*q), d, 2)) {
          const std::int64_t a = c.at("algo");
          if (paths.insert({a, a == 1 ? c.at("mma") : 0, a == 1 ? c.at("stages") > 0 : 0, a == 1 ? c.at("repack") : 0,
                            a == 1 ? c.at("split_k") > 1 : 0})
                  .second)
            sample.push_back(c);
          algos.insert(a);
        }
        CHECK(algos.size() == (std::string_view(layout) == "nhwc" ? 2u : 3u));
        tuner::CompilePool pool(compiler, fam(), *q, sample, d.arch(), 0, true);
        std::size_t compiled = 0;
        while (auto batch = pool.next())
          for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
            INFO(sample[batch->candidates[b]].text(), "\n", batch->output->log);
            REQUIRE(batch->output->ok);
            ++compiled;
          }
        CHECK(compiled == sample.size());
      }
  }
}

TEST_CASE("Winograd (algo 3 / 4 / 5): float32 3x3 of stride 1 only, its limits, and where the default takes it") {
  const DeviceInfo dev = nominal_device(90);
  auto c64 = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                      {"r", "3"}, {"padding", "1"}});
  // The batch-32 layer's default is F(4x4) as batched GEMMs (algo 5, its own test below): 64 channels x 64 tiles in
  // stages of 16 channels, 8 x 4 accumulators.
  const Config g5 = fam().heuristic(*c64, dev);
  CHECK(g5.at("algo") == 5);
  CHECK(g5.at("wino_k") == 64);
  CHECK(g5.at("wino_tiles") == 64);
  CHECK(g5.at("wino_c") == 16);
  CHECK(g5.at("wino_rk") == 8);
  CHECK(g5.at("wino_rt") == 4);
  // A single 56x56 image has 144 GEMM blocks (fewer than two an SM of 132): stages of 8, 4 x 8 accumulators.
  auto n1_c64 = problem({{"dtype", "float32"}, {"n", "1"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"}, {"r", "3"},
                     {"padding", "1"}});
  const Config s5 = fam().heuristic(*n1_c64, dev);
  CHECK(s5.at("algo") == 5);
  CHECK(s5.at("wino_tiles") == 64);
  CHECK(s5.at("wino_c") == 8);
  CHECK(s5.at("wino_rk") == 4);
  CHECK(s5.at("wino_rt") == 8);
  // Channels last too.
  auto c64_nhwc = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                           {"r", "3"}, {"padding", "1"}, {"layout", "nhwc"}});
  CHECK(fam().heuristic(*c64_nhwc, dev).at("algo") == 5);
  // The fused F(4x4) (algo 4) where the batched GEMMs' workspace would pass 4 GiB: 16 channels x 32 tiles of 4x4,
  // 8 x 8 accumulators, 288 threads loading each stage where they store it.
  auto c64_huge = problem({{"dtype", "float32"}, {"n", "512"}, {"c", "64"}, {"h", "224"}, {"w", "224"}, {"k", "64"},
                           {"r", "3"}, {"padding", "1"}});
  const Config f4 = fam().heuristic(*c64_huge, dev);
  CHECK(f4.at("algo") == 4);
  CHECK(f4.at("wino_k") == 16);
  CHECK(f4.at("wino_tiles") == 32);
  CHECK(f4.at("wino_rt") == 8);
  CHECK_FALSE(templates::conv2d::detail::wino_geometry(as_conv(*c64), f4).prefetch_stage);
  CHECK(fam().check(*c64, f4, dev).empty());
  // F(2x2)'s default shape there (the default before F(4x4)): algo 3 with 8 x 4 accumulators.
  Config h = f4;
  h.set("algo", 3), h.set("wino_rt", 4);
  CHECK(fam().check(*c64, h, dev).empty());
  // 25088 tiles: 16 channels x 32 tiles a block, 8 x 4 accumulators a thread (256 threads), stages of 8 channels.
  CHECK(h.at("wino_k") == 16);
  CHECK(h.at("wino_tiles") == 32);
  CHECK(h.at("wino_c") == 8);
  const auto g = templates::conv2d::detail::wino_geometry(as_conv(*c64), h);
  CHECK(g.threads == 256);
  CHECK(g.tiles == 32 * 28 * 28);
  CHECK(g.grid_x == 32 * 28 * 28 / 32);
  CHECK(g.grid_y == 4);
  CHECK(g.prefetch == 16 + 9);
  // The accumulators pass through the stage buffers (4 of a thread's 8 rows at a time), never needing more shared
  // memory than the stages.
  CHECK(g.shared_bytes == 4 * 16 * 8 * (32 + 16));
  CHECK(g.group == 4);
  // A single small image: the batched GEMMs take 64 tiles a block (14 x 14 tiles of 4x4: 144 GEMM blocks, 128 tiles
  // would give 72); with C < 64, F(2x2) takes smaller tiles so that the grid covers the SMs.
  auto n1_64 = problem({{"dtype", "float32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"}, {"r", "3"}});
  const Config small5 = fam().heuristic(*n1_64, dev);
  CHECK(small5.at("algo") == 5);
  CHECK(small5.at("wino_tiles") == 64);
  CHECK(small5.at("wino_rk") == 4);
  auto n1 = problem({{"dtype", "float32"}, {"c", "48"}, {"h", "56"}, {"w", "56"}, {"k", "64"}, {"r", "3"}});
  const Config small = fam().heuristic(*n1, dev);
  CHECK(small.at("algo") == 3);
  // 27 x 27 tiles: 23 x 4 blocks of 16 x 32 (92, over half the 132 SMs), stages of 16 channels.
  CHECK(small.at("wino_tiles") == 32);
  CHECK(small.at("wino_c") == 16);
  auto c256 = problem({{"dtype", "float32"}, {"c", "256"}, {"h", "14"}, {"w", "14"}, {"k", "256"}, {"r", "3"},
                       {"padding", "1"}});
  // 49 tiles of 2x2: 2 x 16 blocks of 32 tiles; 16 of 4x4, too few for the batched GEMMs' blocks.
  CHECK(fam().heuristic(*c256, dev).at("algo") == 3);
  CHECK(fam().heuristic(*c256, dev).at("wino_tiles") == 16);
  // Channels last in float32 runs nowhere else: Winograd takes it at any channel count.
  auto nhwc = problem({{"dtype", "float32"}, {"c", "5"}, {"h", "17"}, {"w", "23"}, {"k", "7"}, {"r", "3"},
                       {"layout", "nhwc"}, {"padding", "1"}});
  CHECK(fam().heuristic(*nhwc, dev).at("algo") == 3);
  // Few channels keep the direct kernel (the seed's rows).
  auto c16 = problem({{"dtype", "float32"}, {"c", "16"}, {"h", "512"}, {"w", "512"}, {"k", "16"}, {"r", "3"}});
  CHECK(fam().heuristic(*c16, dev).at("algo") == 0);
  // Refused: other filters, strides, dilations and dtypes, each saying what runs it instead.
  auto why = [&](std::map<std::string, std::string> options) {
    options.emplace("c", "64"), options.emplace("h", "30"), options.emplace("w", "30"), options.emplace("k", "64");
    options.emplace("r", "3"), options.emplace("dtype", "float32");
    return templates::conv2d::kernel_limits(as_conv(*problem(options)), h, dev);
  };
  CHECK(why({{"stride", "2"}}).find("stride 1 and dilation 1; this is 3x3, stride 2x2") != std::string::npos);
  CHECK(why({{"dilation", "2"}}).find("dilation 2x2") != std::string::npos);
  CHECK(why({{"r", "5"}}).find("this is 5x5") != std::string::npos);
  CHECK(why({{"s", "1"}}).find("this is 3x1") != std::string::npos);
  CHECK(why({{"dtype", "float16"}}).find("takes float32; float16 runs on tensor cores") != std::string::npos);
  CHECK(fam().heuristic(*problem({{"dtype", "float32"}, {"c", "64"}, {"h", "30"}, {"w", "30"}, {"k", "64"},
                                  {"r", "3"}, {"stride", "2"}}),
                        dev)
            .at("algo") == 0);
  // Block shapes: thread tiles must divide the block tile; 512 threads at most; prefetch and registers bounded.
  Config bad = h;
  bad.set("wino_k", 16), bad.set("wino_rk", 8), bad.set("wino_tiles", 16), bad.set("wino_rt", 8), bad.set("wino_c", 4);
  CHECK(templates::conv2d::kernel_limits(as_conv(*c64), bad, dev).empty());
  CHECK(fam().check(*c64, bad, dev).find("threads a block (tuned: 128 or 256)") != std::string::npos);  // 64
  bad = h;
  bad.set("wino_k", 64), bad.set("wino_rk", 4), bad.set("wino_tiles", 64), bad.set("wino_rt", 4);
  CHECK(templates::conv2d::kernel_limits(as_conv(*c64), bad, dev).find("block of 4096 threads") != std::string::npos);
  bad = h;
  bad.set("wino_c", 16), bad.set("wino_tiles", 64), bad.set("wino_rt", 8);  // 4 patches and a filter a thread: 73
  CHECK(templates::conv2d::kernel_limits(as_conv(*c64), bad, dev).find("prefetched loads") != std::string::npos);
  bad = h;
  bad.set("wino_k", 32), bad.set("wino_rt", 8), bad.set("wino_min_blocks", 2);  // 8 x 8 accumulators
  CHECK(templates::conv2d::kernel_limits(as_conv(*c64), bad, dev).find("registers per thread") != std::string::npos);
  // Tiles or channels more than twice the problem leave the block idle.
  auto tiny = problem({{"dtype", "float32"}, {"c", "64"}, {"h", "6"}, {"w", "6"}, {"k", "32"}, {"r", "3"}});
  Config wide = h;
  CHECK(templates::conv2d::kernel_limits(as_conv(*tiny), wide, dev).find("at least twice") != std::string::npos);
  const Config t = fam().heuristic(*tiny, dev);
  CHECK(t.at("algo") == 3);
  CHECK(fam().check(*tiny, t, dev).empty());
  // The tuner's space of the ResNet layer holds Winograd candidates beside the direct kernel's.
  std::size_t pruned = 0, wino = 0, direct = 0;
  for (const Config& c : tuner::legal_candidates(fam(), *c64, dev, pruned)) {
    wino += c.at("algo") == 3;
    direct += c.at("algo") == 0;
  }
  MESSAGE("float32 C = K = 64 56x56: ", wino, " Winograd and ", direct, " direct candidates");
  CHECK(wino >= 12);
  CHECK(wino <= 80);
  CHECK(direct >= 20);
}

TEST_CASE("NVRTC compiles the Winograd kernels (algo 3, 4 and 5) over every knob value, both layouts, with an epilogue") {
  Compiler compiler;
  // NCHW with C, K and the output off every stage, block and tile (69, 29, 41 x 70), channels last with a residual
  // epilogue and uneven padding.
  const char* signatures[] = {
      "bias=1;c=69;dilation_h=1;dilation_w=1;dtype=float32;h=41;k=29;layout=nchw;n=2;pad_h=1;pad_w=1;r=3;s=3;"
      "stride_h=1;stride_w=1;w=70",
      "bias=1;c=64;dilation_h=1;dilation_w=1;dtype=float32;h=30;k=96;layout=nhwc;n=3;pad_h=2;pad_w=0;r=3;s=3;"
      "stride_h=1;stride_w=1;w=33;epilogue=y = max(acc + r, 0.0f)"};
  // The knob values an algorithm cannot run on these problems. K = 29 leaves a block of 64 channels (or 128) more
  // than half idle; 8 tiles a block are F(4x4)'s; F(4x4) blocks of 64 tiles are more than 512 threads; block tiles of
  // 128 are the batched GEMMs' (algo 5).
  auto refused = [&](std::int64_t algo, const char* signature, const std::string& name, std::int64_t value) {
    // algo 5 on K = 29: blocks of 16 or 32 channels need 32 tiles or more for 64 threads.
    if (algo == 5)
      return signature == signatures[0] && ((name == "wino_k" && value >= 64) || (name == "wino_tiles" && value <= 16));
    return (signature == signatures[0] && name == "wino_k" && value == 64) ||
           ((name == "wino_k" || name == "wino_tiles") && value == 128) ||
           (name == "wino_tiles" && value == (algo == 3 ? 8 : 64));
  };
  const std::map<std::int64_t, std::string> entry{
      {3, "conv2d/conv2d.cuh"}, {4, "conv2d/winograd4.cuh"}, {5, "conv2d/winograd4_gemm.cuh"}};
  for (std::int64_t algo : {3, 4, 5})
    for (int cc : {80, 90})
      for (const char* signature : signatures) {
        auto p = fam().parse_problem(signature);
        const DeviceInfo dev = nominal_device(cc);
        std::set<std::pair<std::string, std::int64_t>> seen;
        const std::vector<Config> sample = test::conv2d_knob_sample(as_conv(*p), dev, algo, seen);
        for (const Param& param : fam().space().params())
          if (param.when == "algo" && param.varies_under(algo))
            for (std::int64_t value : param.values) {
              INFO("algo ", algo, " ", std::string(signature), " ", param.name, "=", value);
              CHECK(seen.count({param.name, value}) == (refused(algo, signature, param.name, value) ? 0u : 1u));
            }
        REQUIRE(sample.size() >= (algo == 3 ? 6u : 4u));
        for (const Config& c : sample) CHECK(fam().template_of(c) == entry.at(algo));
        CHECK(compile_sample(compiler, *p, sample, dev, true) == sample.size());
      }
}


TEST_CASE("Winograd F(4x4) (algo 4): algo 3's knobs on 4x4 tiles, its own template, its limits, NVRTC without spills") {
  const DeviceInfo dev = nominal_device(90);
  auto c128 = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "128"}, {"h", "28"}, {"w", "28"}, {"k", "128"},
                       {"r", "3"}, {"padding", "1"}});
  const Config f4 = [&] {
    Config c = fam().heuristic(*c128, dev);
    c.set("algo", 4);
    c.set("wino_k", 16), c.set("wino_rk", 8), c.set("wino_tiles", 16), c.set("wino_rt", 8), c.set("wino_c", 8);
    c.set("wino_min_blocks", 1);
    return c;
  }();
  CHECK(fam().check(*c128, f4, dev).empty());
  const auto g = templates::conv2d::detail::wino_geometry(as_conv(*c128), f4);
  CHECK(g.m == 4);
  CHECK(g.points == 36);
  CHECK(g.threads == 36 * 2 * 2);
  CHECK(g.tiles == 32 * 7 * 7);  // 28 / 4 tiles a side
  CHECK(g.grid_x == 32 * 49 / 16);
  CHECK(g.grid_y == 8);
  CHECK(g.in_per_thread == 1);
  CHECK(g.prefetch == 36 + 9);
  CHECK(g.shared_bytes == 4 * 36 * 8 * (16 + 16));  // the stage: V rows of 16 tiles, U rows of 16 channels
  CHECK(g.group == 4);  // 36 x 2 x 4 rows of 20 floats fit the stage buffers; 8 rows would not
  // Its own template: the program includes winograd4.cuh, so its records carry that template's hash and adding it
  // left algo 0-3's records current.
  CHECK(fam().template_of(f4) == "conv2d/winograd4.cuh");
  Config f2 = f4;
  f2.set("algo", 3);
  CHECK(fam().template_of(f2) == "conv2d/conv2d.cuh");
  const KernelSource src = fam().source(*c128, f4);
  CHECK(src.program.find("#include \"conv2d/winograd4.cuh\"") == 0);
  CHECK(src.name_expression.find("jitune::conv::conv2d_winograd<4, 0, 128, 128, 16, 16, 8, 8, 8, 1, 1, 0>") == 0);
  CHECK(config_template_hash(fam(), f4) != config_template_hash(fam(), f2));
  CHECK(template_hashes(fam()).size() == 6);  // conv2d, winograd4, winograd4_gemm, conv1x1, igemm_repack, igemm_launches
  // Its rounding error does not shrink with C as the float32 tolerance does: C >= 64 only.
  auto c48 = problem({{"dtype", "float32"}, {"c", "48"}, {"h", "28"}, {"w", "28"}, {"k", "128"}, {"r", "3"}});
  CHECK(templates::conv2d::kernel_limits(as_conv(*c48), f4, dev).find("only where C >= 64 (here C = 48)") !=
        std::string::npos);
  // The same limits as algo 3, named as algo 4's.
  auto c16 = problem({{"dtype", "float16"}, {"c", "64"}, {"h", "30"}, {"w", "30"}, {"k", "64"}, {"r", "3"}});
  CHECK(templates::conv2d::kernel_limits(as_conv(*c16), f4, dev).find("algo 4 (Winograd F(4x4, 3x3)) takes float32") ==
        0);
  auto s2 = problem({{"dtype", "float32"}, {"c", "64"}, {"h", "30"}, {"w", "30"}, {"k", "64"}, {"r", "3"},
                     {"stride", "2"}});
  CHECK(templates::conv2d::kernel_limits(as_conv(*s2), f4, dev).find("stride 1 and dilation 1") != std::string::npos);
  Config wide = f4;
  wide.set("wino_c", 16);  // 16 x 16 patches for 144 threads: two patches of 36 a thread
  CHECK(templates::conv2d::kernel_limits(as_conv(*c128), wide, dev).find("prefetched loads") != std::string::npos);
  wide = f4;
  wide.set("wino_rk", 4), wide.set("wino_rt", 4);  // 36 x 4 x 4 = 576 threads
  CHECK(templates::conv2d::kernel_limits(as_conv(*c128), wide, dev).find("block of 576 threads") != std::string::npos);
  // 288 threads are 9 warps, 3 on one of the SM's four register partitions: 168 registers a thread, too few for
  // 8 x 8 accumulators beside a prefetched patch, so that config loads each stage where it stores it; 8 x 4 prefetch.
  CHECK(g.prefetch_stage);  // 144 threads: 255 registers
  wide = f4;
  wide.set("wino_k", 32);  // 36 x 4 x 2 = 288
  CHECK(fam().check(*c128, wide, dev).empty());
  CHECK_FALSE(templates::conv2d::detail::wino_geometry(as_conv(*c128), wide).prefetch_stage);
  CHECK(fam().source(*c128, wide).name_expression.find("<4, 0, 128, 128, 32, 16, 8, 8, 8, 1, 0, 0>") !=
        std::string::npos);
  wide.set("wino_rt", 4), wide.set("wino_tiles", 8);  // 36 x 4 x 2, 8 x 4 accumulators
  CHECK(fam().check(*c128, wide, dev).empty());
  CHECK(templates::conv2d::detail::wino_geometry(as_conv(*c128), wide).prefetch_stage);
  wide.set("wino_min_blocks", 2);  // two blocks of 288: 18 warps, 5 a partition, 102 registers
  CHECK(templates::conv2d::kernel_limits(as_conv(*c128), wide, dev).find("allow 96") != std::string::npos);
  // F(2x2) keeps its own tiles: 8 is F(4x4)'s.
  f2.set("wino_tiles", 8);
  CHECK(fam().check(*c128, f2, dev).find("wino_tiles 8 is F(4x4)'s") != std::string::npos);
  // The tuner's space of the layer holds F(4x4) candidates beside F(2x2)'s.
  std::size_t pruned = 0, four = 0, two = 0;
  for (const Config& c : tuner::legal_candidates(fam(), *c128, dev, pruned)) {
    four += c.at("algo") == 4;
    two += c.at("algo") == 3;
  }
  MESSAGE("float32 C = K = 128 28x28: ", four, " F(4x4) and ", two, " F(2x2) candidates");
  CHECK(four >= 6);
  CHECK(four <= 60);
  // A space-level record of algo 3 (its knobs shared with algo 4) still reads: the conditional knobs vary under
  // either value, and hold their first values under the others.
  CHECK(fam().space().contains(f4));
  Config direct = fam().heuristic(*problem({{"dtype", "float32"}, {"c", "16"}, {"h", "64"}, {"w", "64"}, {"k", "16"},
                                            {"r", "3"}}),
                                  dev);
  REQUIRE(direct.at("algo") == 0);
  direct.set("wino_k", 32);
  CHECK(fam().space().why_not_contained(direct).find("applies only where algo=3 or algo=4") != std::string::npos);
}


TEST_CASE("Winograd F(4x4) as batched GEMMs (algo 5): one cooperative launch, its workspace, its own template, limits, default") {
  const DeviceInfo dev = nominal_device(90);
  auto c128 = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "128"}, {"h", "28"}, {"w", "28"}, {"k", "128"},
                       {"r", "3"}, {"padding", "1"}});
  const Config d5 = fam().heuristic(*c128, dev);
  REQUIRE(d5.at("algo") == 5);
  CHECK(fam().check(*c128, d5, dev).empty());
  // The layer's tuned pick on the H200: 64 output channels x 128 tiles a GEMM block, 8 x 8 accumulators a thread:
  // 8 x 16 = 128 threads (the default has 64 x 64 of 8 x 4).
  Config g5 = d5;
  g5.set("wino_tiles", 128), g5.set("wino_rt", 8);
  CHECK(fam().check(*c128, g5, dev).empty());
  const auto g = templates::conv2d::detail::wgemm_geometry(as_conv(*c128), g5);
  CHECK(g.threads == 128);
  CHECK(g.cp == 128);
  CHECK(g.kp == 128);
  CHECK(g.tiles == 32 * 7 * 7);
  CHECK(g.tp == 13 * 128);
  CHECK(g.gemm_items == 36 * 2 * 13);
  CHECK(g.shared_bytes == 4 * 2 * 16 * (64 + 128));
  // The barrier counter, then U [36][128][128], V and M [36][128][1664] floats.
  const std::size_t u = 36 * 128 * 128 * 4, v = 36 * 128 * 1664 * 4;
  CHECK(g.workspace_bytes == 256 + u + v + v);
  const LaunchPrep prep = fam().prep(*c128, g5);
  CHECK(prep.workspace_bytes == g.workspace_bytes);
  CHECK(prep.zero_end == 4);
  CHECK(prep.rezeroed_by_kernel);
  // One cooperative wave: the grid asks for the most blocks a pass can use (the input transforms' 128 x (128 + 1664)
  // items); the loader caps it at the kernel's occupancy.
  const LaunchShape shape = fam().launch_shape(*c128, g5, dev);
  CHECK(shape.cooperative);
  CHECK(shape.grid.x == 128 * (128 + 1664) / 128);
  CHECK(shape.block.x == 128);
  // Its own template: records of algos 0-4 stay current.
  CHECK(fam().template_of(g5) == "conv2d/winograd4_gemm.cuh");
  const KernelSource src = fam().source(*c128, g5);
  CHECK(src.program.find("#include \"conv2d/winograd4_gemm.cuh\"") == 0);
  CHECK(src.name_expression == "jitune::conv::conv2d_winograd_gemm<0, 128, 128, 64, 128, 16, 8, 8, 1, 0>");
  Config f4 = g5;
  f4.set("algo", 4);
  CHECK(config_template_hash(fam(), g5) != config_template_hash(fam(), f4));
  // The problem's limits are algo 3 and 4's, named as algo 5's.
  auto c48 = problem({{"dtype", "float32"}, {"c", "48"}, {"h", "28"}, {"w", "28"}, {"k", "128"}, {"r", "3"}});
  CHECK(templates::conv2d::kernel_limits(as_conv(*c48), g5, dev).find("algo 5 (Winograd F(4x4, 3x3) as batched GEMMs) rounds within the float32 tolerance only where C >= 64") == 0);
  auto f16 = problem({{"dtype", "float16"}, {"c", "64"}, {"h", "30"}, {"w", "30"}, {"k", "64"}, {"r", "3"}});
  CHECK(templates::conv2d::kernel_limits(as_conv(*f16), g5, dev).find("takes float32") != std::string::npos);
  // Its own: threads, registers, the workspace; block tiles of 128 are its alone.
  Config bad = g5;
  bad.set("wino_k", 16), bad.set("wino_tiles", 8), bad.set("wino_rt", 8);  // 2 x 1 threads
  CHECK(templates::conv2d::kernel_limits(as_conv(*c128), bad, dev).find("block of 2 threads") == 0);
  bad = g5;
  bad.set("wino_k", 128), bad.set("wino_rk", 4), bad.set("wino_min_blocks", 2);  // 512 threads, two an SM: 64 each
  CHECK(templates::conv2d::kernel_limits(as_conv(*c128), bad, dev).find("registers per thread") != std::string::npos);
  auto huge = problem({{"dtype", "float32"}, {"n", "64"}, {"c", "512"}, {"h", "224"}, {"w", "224"}, {"k", "512"},
                       {"r", "3"}, {"padding", "1"}});
  CHECK(templates::conv2d::kernel_limits(as_conv(*huge), g5, dev).find("algo 5 keeps the transformed input") == 0);
  CHECK(fam().heuristic(*huge, dev).at("algo") == 4);  // no workspace: the fused kernel
  Config wide = f4;
  wide.set("wino_tiles", 128);
  CHECK(templates::conv2d::kernel_limits(as_conv(*c128), wide, dev).find("are the batched GEMMs' block tiles (algo 5)") !=
        std::string::npos);
  // The tuned neighbourhood: 128 or 256 threads of 32 or 64 accumulators, stages of 8 or 16 channels.
  Config off = g5;
  off.set("wino_c", 4);
  CHECK(fam().check(*c128, off, dev).find("wino_c 4 (tuned: 8 or 16)") != std::string::npos);
  off = g5;
  off.set("wino_k", 32), off.set("wino_rk", 4), off.set("wino_rt", 4);  // 8 x 32 threads of 16 accumulators
  CHECK(fam().check(*c128, off, dev).find("16 accumulators a thread") != std::string::npos);
  off = g5;
  off.set("wino_tiles", 64);  // 8 x 8 = 64 threads
  CHECK(fam().check(*c128, off, dev).find("64 threads a block (tuned: 128 or 256)") != std::string::npos);
  std::size_t pruned = 0, five = 0;
  for (const Config& c : tuner::legal_candidates(fam(), *c128, dev, pruned)) five += c.at("algo") == 5;
  MESSAGE("float32 C = K = 128 28x28: ", five, " algo 5 candidates");
  CHECK(five >= 20);
  CHECK(five <= 80);
  // Channels last: V and M transposed (the passes read x and write y channels fastest), its V rows padded in
  // shared memory; the same default.
  auto nhwc = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "128"}, {"h", "28"}, {"w", "28"}, {"k", "128"},
                       {"r", "3"}, {"padding", "1"}, {"layout", "nhwc"}});
  const Config n5 = fam().heuristic(*nhwc, dev);
  CHECK(n5 == d5);
  CHECK(templates::conv2d::detail::wgemm_geometry(as_conv(*nhwc), n5).shared_bytes == 4 * 2 * 16 * (64 + 64 + 4));
  CHECK(fam().source(*nhwc, n5).name_expression == "jitune::conv::conv2d_winograd_gemm<1, 128, 128, 64, 64, 16, 8, 4, 1, 0>");
}

TEST_CASE("TF32 (precision tf32): float32 on the implicit GEMM's tensor cores as an opt-in; signature, rules, NVRTC") {
  auto conv = [](const char* dtype, const char* precision, const char* layout = "nchw", const char* c = "64") {
    return problem({{"dtype", dtype}, {"n", "2"}, {"c", c}, {"h", "28"}, {"w", "28"}, {"k", "64"}, {"r", "3"},
                    {"padding", "1"}, {"layout", layout}, {"precision", precision}});
  };
  auto tf32 = conv("float32", "tf32"), ieee = conv("float32", "ieee");
  // The opt-in is part of the problem: its own signature (alphabetical, after pad_w) and group, parsed back.
  CHECK(tf32->signature().find(";pad_w=1;precision=tf32;r=3;") != std::string::npos);
  CHECK(ieee->signature().find("precision") == std::string::npos);
  CHECK(ieee->signature() == conv("float32", "ieee")->signature());
  CHECK(tf32->signature() != ieee->signature());
  CHECK(fam().parse_problem(tf32->signature())->signature() == tf32->signature());
  CHECK(tf32->group() == "float32+tf32|nchw|f=3x3|st=1x1|d=1x1");
  CHECK(ieee->group() == "float32|nchw|f=3x3|st=1x1|d=1x1");
  // 16-bit inputs are exact on tensor cores either way: their problems drop it (one signature).
  CHECK(conv("float16", "tf32")->signature() == conv("float16", "ieee")->signature());
  CHECK_FALSE(as_conv(*conv("bfloat16", "tf32")).tf32());
  CHECK_THROWS_WITH_AS(conv("float32", "fp16"), doctest::Contains("precision 'fp16' is not ieee"), InvalidArgument);
  // A call passes it after the layout.
  Conv2dParams params;
  params.input = {2, 64, 28, 28};
  params.weight = {64, 64, 3, 3};
  params.padding = {1, 1};
  params.precision = Fp32Precision::kTF32;
  CallArgs args;
  conv2d_call_args(args, params, DType::kFloat32, false);
  CHECK(fam().problem_from_call(args)->signature() == tf32->signature());
  params.precision = static_cast<Fp32Precision>(7);
  CallArgs bad;
  conv2d_call_args(bad, params, DType::kFloat32, false);
  CHECK_THROWS_WITH_AS(fam().problem_from_call(bad), doctest::Contains("precision 7 is neither ieee"), InvalidArgument);

  for (int cc : {80, 90}) {
    const DeviceInfo dev = nominal_device(cc);
    INFO("sm_", cc);
    // The default runs TF32 tensor cores where a float16 problem would run the implicit GEMM; exact otherwise.
    const Config h = fam().heuristic(*tf32, dev);
    CHECK(h.at("algo") == 1);
    CHECK(fam().validate(*tf32, h, dev).empty());
    CHECK(fam().heuristic(*ieee, dev).at("algo") == 3);
    CHECK(fam().validate(*ieee, h, dev).find("keeps its products exact") != std::string::npos);
    // The tuner times the exact kernels beside the TF32 ones.
    std::size_t pruned = 0;
    std::set<std::int64_t> algos;
    for (const Config& c : tuner::legal_candidates(fam(), *tf32, dev, pruned)) algos.insert(c.at("algo"));
    CHECK(algos == std::set<std::int64_t>{0, 1, 3, 4, 5});
    // What TF32 does not take: the NCHW pixel-run operand (wgmma reads TF32 K-major only). Repacking to channels
    // last copies 4-channel taps (C a multiple of 4), its workspace sized in floats.
    Config x = h;
    x.set("repack", 1);
    x.set("stages", 3);
    x.set("split_k", 1);
    if (cc == 90) x.set("mma", 1), x.set("tile_k", 32), x.set("tile_m", 64), x.set("warps_m", 1), x.set("tile_n", 64),
                  x.set("warps_n", 1), x.set("split_k", 1), x.set("min_blocks", 1);
    CHECK(templates::conv2d::kernel_limits(as_conv(*tf32), x, dev).empty());
    CHECK(fam().prep(*tf32, x).workspace_bytes == 256 + (2 * 28 * 28 * 64 * 4 + 255) / 256 * 256 + 64 * 9 * 64 * 4);
    auto six = conv("float32", "tf32", "nchw", "66");
    CHECK(templates::conv2d::kernel_limits(as_conv(*six), x, dev).find("C a multiple of 4 (C = 66)") !=
          std::string::npos);
    auto one = problem({{"dtype", "float32"}, {"n", "2"}, {"c", "64"}, {"h", "28"}, {"w", "28"}, {"k", "64"},
                        {"r", "1"}, {"precision", "tf32"}});
    const Config h1 = fam().heuristic(*one, dev);
    CHECK(h1.at("algo") != 1);  // C * R * S = 64: the direct kernel, as for float16
    Config runs = fam().heuristic(*conv("float16", "ieee"), nominal_device(90));
    runs.set("stages", 3);
    runs.set("tile_k", 32);
    if (cc == 90)
      CHECK(fam().validate(*one, runs, dev).find("which TF32 does not take") != std::string::npos);
  }
  // wgmma stages 128-byte rows: 32 floats.
  const DeviceInfo h100 = nominal_device(90);
  auto nhwc = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                       {"r", "3"}, {"padding", "1"}, {"layout", "nhwc"}, {"precision", "tf32"}});
  const Config wg = fam().heuristic(*nhwc, h100);
  CHECK(wg.at("algo") == 1);
  CHECK(wg.at("mma") == 1);
  CHECK(wg.at("tile_k") == 32);
  CHECK(wg.at("stages") > 0);  // channels last, C a multiple of 4: the cp.async pipeline
  CHECK(fam().validate(*nhwc, wg, h100).empty());
  // The same layer in NCHW: repacked to channels last first (TF32 has no pixel-run operand), 1x1 layers too.
  auto nchw = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "64"},
                       {"r", "3"}, {"padding", "1"}, {"precision", "tf32"}});
  const Config rp = fam().heuristic(*nchw, h100);
  CHECK(rp.at("repack") == 1);
  CHECK(rp.at("mma") == 1);
  CHECK(fam().validate(*nchw, rp, h100).empty());
  auto expand = problem({{"dtype", "float32"}, {"n", "32"}, {"c", "64"}, {"h", "56"}, {"w", "56"}, {"k", "256"},
                         {"r", "1"}, {"precision", "tf32"}});
  CHECK(fam().heuristic(*expand, h100).at("repack") == 0);  // C * R * S = 64: below the implicit GEMM's default
  Config wide = wg;
  wide.set("tile_k", 64);
  CHECK(fam().validate(*nhwc, wide, h100).find("tile_k 32 for float32, not 64") != std::string::npos);
  auto odd = conv("float32", "tf32", "nhwc", "6");
  Config pipelined = wg;
  CHECK(fam().validate(*odd, pipelined, h100).find("C a multiple of 4 (C = 6)") != std::string::npos);
  // The tolerance adds TF32's truncation of the inputs (about 2^-10 relative a product).
  CHECK(fam().output_check(*tf32, 0).atol > fam().output_check(*ieee, 0).atol + 0.5);
  // Register-staged stages of 64 floats spill: refused.
  Config staged = fam().heuristic(*tf32, nominal_device(80));
  staged.set("mma", 0);
  staged.set("stages", 0);
  staged.set("tile_k", 64);
  CHECK(fam().validate(*tf32, staged, nominal_device(80)).find("256-byte rows spill") != std::string::npos);

  // NVRTC builds every algo-1 knob value in TF32, both layouts, for sm_80 and sm_90, with an epilogue.
  Compiler compiler;
  for (int cc : {80, 90})
    for (const char* layout : {"nchw", "nhwc"}) {
      auto p = problem({{"dtype", "float32"}, {"n", "2"}, {"c", "96"}, {"h", "30"}, {"w", "64"}, {"k", "96"},
                        {"r", "3"}, {"padding", "1"}, {"bias", "1"}, {"layout", layout}, {"precision", "tf32"},
                        {"epilogue", "y = max(acc + r, 0.0f)"}});
      const DeviceInfo dev = nominal_device(cc);
      std::set<std::pair<std::string, std::int64_t>> seen;
      const std::vector<Config> sample = test::conv2d_knob_sample(as_conv(*p), dev, 1, seen);
      for (const Param& param : fam().space().params())
        if (param.when == "algo" && param.varies_under(1))
          for (std::int64_t value : param.values) {
            INFO("sm_", cc, " ", layout, " ", param.name, "=", value);
            // Not in TF32: persistent pixel runs (16-bit NCHW 1x1 only), wgmma before sm_90; repacking is NCHW's; tile_n
            // 256 is algo 6's.
            const bool never = (param.name == "persist" && value == 1) || (param.name == "tile_n" && value == 256) ||
                               (param.name == "mma" && value == 1 && cc != 90) ||
                               (param.name == "repack" && value >= 1 && std::string_view(layout) == "nhwc");
            CHECK(seen.count({param.name, value}) == (never ? 0u : 1u));
          }
      for (const Config& c : sample) {
        INFO(c.text());
        require_compiles(compiler, *p, c, dev);
      }
    }
}

TEST_CASE("the NCHW 1x1 streaming GEMM (algo 6): its problems, limits, default, variant, its own template, NVRTC") {
  const DeviceInfo hopper = nominal_device(90), ampere = nominal_device(80);
  auto one = [](const char* c, const char* k, std::map<std::string, std::string> more = {}) {
    std::map<std::string, std::string> o{{"dtype", "float16"}, {"n", "32"}, {"c", c},  {"h", "56"},
                                         {"w", "56"},          {"k", k},    {"r", "1"}};
    for (auto& [key, v] : more) o[key] = v;
    return problem(o);
  };
  namespace d = templates::conv2d::detail;
  // The default of the suite's 56x56 expansion on sm_80 and sm_90: 128 channels x 64 pixels of four warps, a ring
  // of 2 tiles, two blocks an SM. Its reduction (K < C) keeps the implicit GEMM by default; algo 6's own default
  // there: 64 channels x 64 pixels, one block an SM (that is what fits).
  auto expand = one("64", "256"), reduce = one("256", "64");
  const Config e = fam().heuristic(*expand, hopper), r = d::stream_heuristic(as_conv(*reduce), hopper);
  CHECK(fam().heuristic(*reduce, hopper).at("algo") == 1);
  CHECK(fam().heuristic(*one("64", "64"), hopper).at("algo") == 6);
  CHECK(e.at("algo") == 6);
  CHECK(e.at("tile_n") == 128);
  CHECK(e.at("tile_m") == 64);
  CHECK(e.at("warps_n") * e.at("warps_m") == 4);
  CHECK(e.at("min_blocks") == 2);
  CHECK(r.at("algo") == 6);
  CHECK(r.at("tile_n") == 64);
  CHECK(r.at("min_blocks") == 1);  // w (64 x 264 halves) and the ring of 256 channels: one block an SM
  CHECK(fam().validate(*expand, e, hopper).empty());
  CHECK(fam().validate(*reduce, r, hopper).empty());
  CHECK(fam().heuristic(*expand, ampere).at("algo") == 6);
  // Shared memory: w [256][64 + 8], the ring [2][64][64 + 8], four warps' stages [32][64 + 8]; no workspace.
  const auto g = d::stream_geometry(as_conv(*expand), e);
  CHECK(g.shared_bytes == 2 * (256 * 72 + 2 * 64 * 72 + 4 * 32 * 72));
  CHECK(g.tiles == 32 * 49);
  const LaunchShape shape = fam().launch_shape(*expand, e, hopper);
  CHECK(shape.shared_bytes == g.shared_bytes);
  CHECK(shape.block.x == 128);
  CHECK(shape.grid.x == 2 * 132);  // persistent: two blocks an SM
  CHECK(fam().prep(*expand, e).workspace_bytes == 0);
  CHECK(fam().launch_shape(*one("64", "256", {{"n", "1"}, {"h", "8"}, {"w", "8"}}), e, hopper).grid.x == 1);
  // Its own template: every record of algos 0-5 stays current.
  CHECK(fam().template_of(e) == "conv2d/conv1x1.cuh");
  const KernelSource src = fam().source(*expand, e);
  CHECK(src.program.find("#include \"conv2d/conv1x1.cuh\"") == 0);
  CHECK(src.name_expression == "jitune::conv::conv2d_1x1_stream<__half, 64, 256, 128, 64, 4, 1, 2, 2, 0>");
  // What it does not run, with the reason and what runs instead; the default then takes algo 1.
  auto why = [&](const Problem& q, std::initializer_list<std::pair<const char*, std::int64_t>> changes = {}) {
    Config x = e;
    for (auto [name, value] : changes) x.set(name, value);
    return fam().validate(q, x, hopper);
  };
  CHECK(why(*one("64", "256", {{"dtype", "float32"}})).find("algo 6 (the NCHW 1x1 streaming GEMM) takes float16 or bfloat16") == 0);
  CHECK(why(*one("64", "256", {{"layout", "nhwc"}})).find("NCHW 1x1 convolutions of stride 1 without padding") != std::string::npos);
  CHECK(why(*one("64", "256", {{"stride", "2"}})).find("stride 1") != std::string::npos);
  CHECK(why(*one("64", "256", {{"padding", "1"}})).find("without padding") != std::string::npos);
  CHECK(why(*one("64", "256", {{"r", "3"}})).find("1x1") != std::string::npos);
  CHECK(why(*one("64", "256", {{"h", "14"}, {"w", "14"}})).find("H * W = 196 is not a multiple of 8") != std::string::npos);
  CHECK(why(*one("60", "256")).find("C = 60 is not a multiple of 8") != std::string::npos);
  CHECK(fam().validate(*expand, e, nominal_device(75)).find("sm_80 or newer") != std::string::npos);
  CHECK(why(*one("1024", "256")).find("keeps all of w (K x C = 256 x 1024)") != std::string::npos);
  CHECK(fam().heuristic(*one("1024", "256"), hopper).at("algo") == 1);
  CHECK(fam().heuristic(*one("64", "256", {{"h", "14"}, {"w", "14"}}), hopper).at("algo") == 1);
  CHECK(why(*expand, {{"stages", 0}}).find("ring of 2 to 4 tiles") != std::string::npos);
  CHECK(why(*expand, {{"stages", 6}}).find("ring of 2 to 4 tiles") != std::string::npos);
  CHECK(why(*expand, {{"tile_n", 16}, {"warps_n", 2}}).find("whole multiples of 16 x 16") != std::string::npos);
  CHECK(why(*expand, {{"tile_n", 256}, {"warps_n", 1}, {"tile_m", 256}, {"warps_m", 1}}).find("accumulators a thread") != std::string::npos);
  CHECK(why(*reduce, {{"tile_n", 256}}).find("tile_n 256 is at least twice K = 64") != std::string::npos);
  CHECK(why(*one("64", "256", {{"h", "4"}, {"w", "4"}}), {{"tile_m", 64}}).find("at least twice the image's 16 pixels") != std::string::npos);
  // The tuned neighbourhood: 4 or 8 warps of 32 or 64 channels x 32 or 64 pixels; min_blocks 2 only where two fit.
  CHECK(why(*expand, {{"tile_n", 64}, {"warps_n", 4}}).find("warp tile 16 x 64") != std::string::npos);
  CHECK(why(*expand, {{"warps_n", 2}, {"warps_m", 1}}).find("2 warps a block") != std::string::npos);
  CHECK(why(*reduce, {{"min_blocks", 2}, {"tile_n", 64}, {"warps_n", 2}, {"warps_m", 2}}).find("min_blocks 2 where the shared memory holds one block") != std::string::npos);
  // tile_n 256: algo 1 takes it on wgmma warpgroups only, and refuses it by name with mma.sync.
  Config ig = d::igemm_heuristic(as_conv(*expand), hopper);
  REQUIRE(ig.at("mma") == 1);
  ig.set("tile_n", 256);
  CHECK(templates::conv2d::kernel_limits(as_conv(*expand), ig, hopper).find("tile_n") == std::string::npos);
  ig.set("mma", 0);
  CHECK(templates::conv2d::kernel_limits(as_conv(*expand), ig, hopper).find("tile_n 256 with mma.sync (mma 0)") == 0);
  std::size_t pruned = 0, six = 0, wide = 0;
  for (const Config& c : tuner::legal_candidates(fam(), *expand, hopper, pruned))
    if (c.at("algo") == 6) ++six, wide += c.at("tile_n") == 256;
  MESSAGE("float16 N32 C64 -> K256 56x56: ", six, " algo 6 candidates");
  CHECK(six >= 12);
  CHECK(six <= 120);
  CHECK(wide >= 2);
  // x, w, y or the residual off 16 bytes: the implicit GEMM through registers (variant 1), legal for every problem
  // algo 6 takes; aligned: the streaming GEMM itself.
  alignas(16) static const std::byte block[64] = {};
  const std::uint8_t aligned_classes[] = {16, 16, 16, 16, 16}, w_off[] = {16, 8, 16, 16, 16};
  const void* aligned_ptrs[] = {block, block, nullptr, block, nullptr};
  const void* x_off[] = {block + 2, block, nullptr, block, nullptr};
  const void* y_off[] = {block, block, nullptr, block + 8, nullptr};
  Bindings b;
  b.alignment = aligned_classes;
  b.pointers = aligned_ptrs;
  CHECK(fam().variant(*expand, e, b) == 0);
  b.pointers = x_off;
  CHECK(fam().variant(*expand, e, b) == 1);
  b.pointers = y_off;
  CHECK(fam().variant(*expand, e, b) == 1);
  b.pointers = aligned_ptrs;
  b.alignment = w_off;
  CHECK(fam().variant(*expand, e, b) == 1);
  auto residual = one("64", "256", {{"epilogue", "y = acc + r"}});
  const void* r_off[] = {block, block, nullptr, block, block + 4};
  b.alignment = aligned_classes;
  b.pointers = r_off;
  CHECK(fam().variant(*residual, fam().heuristic(*residual, hopper), b) == 1);
  for (auto [n, c, k, h] : {std::array<std::int64_t, 4>{32, 64, 256, 56}, {32, 256, 64, 56}, {1, 8, 8, 2},
                            {3, 40, 24, 12}, {2, 512, 512, 28}}) {
    auto q = one(std::to_string(c).c_str(), std::to_string(k).c_str(),
                 {{"n", std::to_string(n)}, {"h", std::to_string(h)}, {"w", std::to_string(h)}});
    for (const DeviceInfo& dev : {hopper, ampere}) {
      const Config v = fam().variant_config(*q, e, 1, dev);
      INFO(q->signature(), " -> ", v.text());
      CHECK(v.at("algo") == 1);
      CHECK(v.at("stages") == 0);
      CHECK(templates::conv2d::kernel_limits(as_conv(*q), v, dev).empty());
    }
  }
  // NVRTC: both 16-bit types, bias and a residual epilogue, K and C off the tiles (K = 40: rows past K; C = 24: a
  // zero-padded k16 step), every ring depth, warp tiles of 32 and 64, 256 channels a block; without spilling. A
  // 64 x 64 warp tile (128 accumulators) takes the bias but not an epilogue besides (the limits say so).
  Compiler compiler;
  std::size_t compiled = 0;
  for (const char* dtype : {"float16", "bfloat16"})
    for (auto [c, k, tn, tm, wn, wm, stages, mb, epi] :
         {std::array<std::int64_t, 9>{64, 256, 256, 64, 4, 1, 2, 2, 0}, {24, 40, 64, 128, 2, 2, 3, 1, 1},
          {256, 64, 64, 64, 2, 2, 4, 1, 1}, {64, 256, 128, 64, 4, 1, 2, 2, 1}}) {
      std::map<std::string, std::string> more{{"dtype", dtype}, {"bias", "1"}};
      if (epi) more["epilogue"] = "y = max(acc + r, 0.0f)";
      auto q = one(std::to_string(c).c_str(), std::to_string(k).c_str(), more);
      Config x = e;
      x.set("tile_n", tn), x.set("tile_m", tm), x.set("warps_n", wn), x.set("warps_m", wm), x.set("stages", stages);
      x.set("min_blocks", mb);
      INFO(dtype, " ", x.text());
      CHECK(require_compiles(compiler, *q, x, hopper).find(epi ? ", 1, jitune_conv_epilogue>" : ", 1>") !=
            std::string::npos);
      ++compiled;
      if (!epi) {
        auto q_epi = one(std::to_string(c).c_str(), std::to_string(k).c_str(),
                         {{"dtype", dtype}, {"bias", "1"}, {"epilogue", "y = max(acc + r, 0.0f)"}});
        CHECK(templates::conv2d::kernel_limits(as_conv(*q_epi), x, hopper).find("registers per thread") !=
              std::string::npos);
      }
    }
  CHECK(compiled == 8);
}

}  // namespace jitune
