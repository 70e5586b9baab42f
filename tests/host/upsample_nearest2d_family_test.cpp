// The upsample_nearest2d family without a GPU: PyTorch's index rules against hand-worked tables (fractional scales,
// nearest and nearest-exact, forward and backward windows), problem validation and signatures, the 2x rule, the
// constraints and heuristic, the pointer rule, the CPU reference, and an NVRTC compile of the space for sm_80 and
// sm_90 (every kernel template, both layouts, every dtype).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

#include "runtime/compiler.hpp"
#include "templates/host_float.hpp"
#include "templates/sources.hpp"
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using templates::upsample_nearest2d::Direction;
using templates::upsample_nearest2d::KernelKind;
using templates::upsample_nearest2d::Strategy;
using templates::upsample_nearest2d::UpsampleProblem;

const Family& fam() { return templates::upsample_nearest2d::upsample_nearest2d_family(); }

UpsampleNearest2d shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t oh,
                        std::int64_t ow, DType dtype = DType::kFloat32, ImageLayout layout = ImageLayout::kNCHW,
                        NearestMode mode = NearestMode::kNearest) {
  UpsampleNearest2d s;
  s.n = n;
  s.c = c;
  s.in_h = h;
  s.in_w = w;
  s.out_h = oh;
  s.out_w = ow;
  s.dtype = dtype;
  s.layout = layout;
  s.mode = mode;
  return s;
}

UpsampleNearest2d scaled(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, double sh, double sw,
                         DType dtype = DType::kFloat32, ImageLayout layout = ImageLayout::kNCHW) {
  UpsampleNearest2d s = shape(n, c, h, w, 0, 0, dtype, layout);
  s.scale_h = sh;
  s.scale_w = sw;
  return s;
}

// Forward source indices of one dimension: in -> out with an optional scale factor.
std::vector<std::int64_t> sources(std::int64_t in, std::int64_t out, std::optional<double> factor, NearestMode mode) {
  const float step = templates::upsample_nearest2d::forward_step(in, out, factor);
  std::vector<std::int64_t> v;
  for (std::int64_t d = 0; d < out; ++d) v.push_back(templates::upsample_nearest2d::source_index(d, step, in, mode));
  return v;
}

// Backward window starts 0..in of one dimension.
std::vector<std::int64_t> starts(std::int64_t in, std::int64_t out, std::optional<double> factor, NearestMode mode) {
  const float step = templates::upsample_nearest2d::backward_step(in, out, factor);
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i <= in; ++i) v.push_back(templates::upsample_nearest2d::window_start(i, step, out, mode));
  return v;
}

using V = std::vector<std::int64_t>;
constexpr NearestMode kNearest = NearestMode::kNearest;
constexpr NearestMode kExact = NearestMode::kNearestExact;

}  // namespace

TEST_CASE("upsample_nearest2d is registered and its template is embedded") {
  CHECK(&family("upsample_nearest2d") == &fam());
  const std::string src = template_source("upsample_nearest2d/upsample_nearest2d.cuh");
  CHECK(src.find("forward_2x") != std::string::npos);
  CHECK(src.find("backward_2x") != std::string::npos);
  CHECK(template_hash("upsample_nearest2d/upsample_nearest2d.cuh").size() == 16);
}

TEST_CASE("forward index rule: hand-worked tables for fractional scales") {
  // 5 -> 7, step 5/7 = 0.714285731f: floor(d * step) = 0, 0.71, 1.43, 2.14, 2.86, 3.57, 4.29.
  CHECK(sources(5, 7, std::nullopt, kNearest) == V{0, 0, 1, 2, 2, 3, 4});
  // nearest-exact: floor((d + 0.5) * step) = 0.36, 1.07, 1.79, 2.5, 3.21, 3.93, 4.64.
  CHECK(sources(5, 7, std::nullopt, kExact) == V{0, 1, 1, 2, 3, 3, 4});
  // scale_factor 1.5 on 5: size floor(7.5) = 7, step float(1 / 1.5) = 0.666666687f; 3 * step = 2.0000001 -> 2.
  CHECK(templates::upsample_nearest2d::derived_size(5, 1.5) == 7);
  CHECK(sources(5, 7, 1.5, kNearest) == V{0, 0, 1, 2, 2, 3, 4});
  // 3 -> 8 (x 2.67): step 0.375; exact (d + 0.5) * 0.375 = 0.19, 0.56, 0.94, 1.31, 1.69, 2.06, 2.44, 2.81.
  CHECK(sources(3, 8, std::nullopt, kNearest) == V{0, 0, 0, 1, 1, 1, 2, 2});
  CHECK(sources(3, 8, std::nullopt, kExact) == V{0, 0, 0, 1, 1, 2, 2, 2});
  // Downsampling 7 -> 3: step 2.3333333f; exact 1.17, 3.5, 5.83.
  CHECK(sources(7, 3, std::nullopt, kNearest) == V{0, 2, 4});
  CHECK(sources(7, 3, std::nullopt, kExact) == V{1, 3, 5});
  // scale_factor 0.5 on 8: size 4, step 2.
  CHECK(templates::upsample_nearest2d::derived_size(8, 0.5) == 4);
  CHECK(sources(8, 4, 0.5, kNearest) == V{0, 2, 4, 6});
  CHECK(sources(8, 4, 0.5, kExact) == V{1, 3, 5, 7});
  // x3 and x2 are exact: d / 3 and d / 2.
  CHECK(sources(2, 6, 3.0, kNearest) == V{0, 0, 0, 1, 1, 1});
  CHECK(sources(3, 6, std::nullopt, kExact) == V{0, 0, 1, 1, 2, 2});
  // The float step rounds: 2 -> 82 gives step 0.0243902430f and 41 * step = 0.99999994 -> 0, not 1.
  CHECK(sources(2, 82, std::nullopt, kNearest)[41] == 0);
  // A size given with a factor that does not match it: the factor sets the rule (aten's contract), clamped.
  CHECK(sources(4, 6, 3.0, kNearest) == V{0, 0, 0, 1, 1, 1});
  CHECK(sources(4, 3, 0.5, kNearest) == V{0, 2, 3});
}

TEST_CASE("backward window rule: hand-worked starts, PyTorch's (not always the forward's adjoint)") {
  // 3 -> 8: step 8/3 = 2.66666675f; ceil(i * step) = 0, 3, 6, ceil(8.0) = 8.
  CHECK(starts(3, 8, std::nullopt, kNearest) == V{0, 3, 6, 8});
  // nearest-exact: ceil(i * step - 0.5) = 0, 3, 5, 8 (matches the exact forward table above).
  CHECK(starts(3, 8, std::nullopt, kExact) == V{0, 3, 5, 8});
  // x2: [2i, 2i + 2) in both modes.
  CHECK(starts(4, 8, 2.0, kNearest) == V{0, 2, 4, 6, 8});
  CHECK(starts(4, 8, 2.0, kExact) == V{0, 2, 4, 6, 8});
  // Downsampling 8 -> 4 (factor 0.5): windows of 0 and 1 elements, the odd inputs receive nothing.
  CHECK(starts(8, 4, 0.5, kNearest) == V{0, 1, 1, 2, 2, 3, 3, 4, 4});
  CHECK(starts(8, 4, 0.5, kExact) == V{0, 0, 1, 1, 2, 2, 3, 3, 4});
  // 2 -> 82: the window step 41 puts output 41 in input 1's window although the forward reads input 0 there.
  CHECK(starts(2, 82, std::nullopt, kNearest) == V{0, 41, 82});
  // nearest-exact rounds once (nvcc's FMA): 6 -> 1, step 0.166666672f, 3 * step - 0.5 = 2.2e-8 > 0 -> 1.
  CHECK(starts(6, 1, std::nullopt, kExact) == V{0, 0, 0, 1, 1, 1, 1});
  // A window end never passes the output.
  CHECK(starts(5, 7, 1.5, kNearest) == V{0, 2, 3, 5, 6, 7});
}

TEST_CASE("problem: validation, resolved sizes, signature round trip, group") {
  UpsampleProblem p(Direction::kForward, scaled(2, 3, 5, 7, 1.5, 2.0, DType::kFloat16, ImageLayout::kNHWC));
  CHECK(p.shape().out_h == 7);
  CHECK(p.shape().out_w == 14);
  CHECK(p.signature() ==
        "c=3;direction=forward;dtype=float16;in_h=5;in_w=7;layout=nhwc;mode=nearest;n=2;out_h=7;out_w=14;"
        "scale_h=1.5;scale_w=2");
  CHECK(fam().parse_problem(p.signature())->signature() == p.signature());
  CHECK(p.group() == "float16|nhwc|forward|general");
  CHECK(p.bytes_moved() == (2 * 3 * 5 * 7 + 2 * 3 * 7 * 14) * 2.0);
  CHECK(upsample_nearest2d_signature(scaled(1, 1, 4, 4, 2, 2), true) ==
        "c=1;direction=backward;dtype=float32;in_h=4;in_w=4;layout=nchw;mode=nearest;n=1;out_h=8;out_w=8;"
        "scale_h=2;scale_w=2");
  auto cli = fam().make_problem({{"dtype", "bf16"}, {"n", "1"}, {"c", "4"}, {"in_h", "3"}, {"in_w", "3"},
                                 {"scale_h", "3"}, {"out_w", "5"}, {"mode", "nearest-exact"},
                                 {"direction", "backward"}});
  CHECK(cli->signature() ==
        "c=4;direction=backward;dtype=bfloat16;in_h=3;in_w=3;layout=nchw;mode=nearest-exact;n=1;out_h=9;out_w=5;"
        "scale_h=3;scale_w=none");

  auto throws = [](const UpsampleNearest2d& s, const char* text) {
    try {
      UpsampleProblem bad(Direction::kForward, s);
      FAIL("no exception for ", text);
    } catch (const InvalidArgument& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(text) != std::string::npos);
    }
  };
  throws(shape(1, 1, 0, 4, 8, 8), "at least 1x1");
  throws(shape(-1, 1, 4, 4, 8, 8), "must be >= 0");
  throws(shape(1, 1, 4, 4, -8, 8), "is negative");
  throws(shape(1, 1, 4, 4, 0, 8), "both missing");
  throws(scaled(1, 1, 4, 4, 0.0, 2.0), "positive finite");
  throws(scaled(1, 1, 4, 4, -2.0, 2.0), "positive finite");
  throws(scaled(1, 1, 3, 4, 0.3, 2.0), "output size of 0");
  throws(shape(1, 1, 4, 4, 8, 8, DType::kInt32), "not supported");
  throws(shape(1, 1, 4, 4, std::int64_t{1} << 32, 8), "below 2^31");
  throws(shape(std::int64_t{1} << 40, std::int64_t{1} << 20, 64, 64, 64, 64), "too many elements");
  CHECK_THROWS_AS(fam().make_problem({{"dtype", "float32"}, {"n", "1"}, {"c", "1"}, {"in_h", "2"}}), InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"dtype", "float32"}, {"n", "1"}, {"c", "1"}, {"in_h", "2"}, {"in_w", "2"},
                                      {"out_h", "4"}, {"out_w", "4"}, {"layout", "nhcw"}}),
                  InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"dtype", "float32"}, {"n", "1"}, {"c", "1"}, {"in_h", "2"}, {"in_w", "2"},
                                      {"scale_h", "two"}, {"out_w", "4"}}),
                  InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"dtype", "float32"}, {"n", "1"}, {"c", "1"}, {"in_h", "2"}, {"in_w", "2"},
                                      {"out_h", "4"}, {"out_w", "4"}, {"bogus", "1"}}),
                  InvalidArgument);
}

TEST_CASE("the 2x rule: exact x2 in both dimensions, forward and backward") {
  for (Direction d : {Direction::kForward, Direction::kBackward}) {
    CHECK(UpsampleProblem(d, scaled(2, 3, 5, 7, 2, 2)).packed_2x());
    CHECK(UpsampleProblem(d, shape(2, 3, 5, 7, 10, 14)).packed_2x());
    CHECK(UpsampleProblem(d, shape(2, 3, 5, 7, 10, 14, DType::kFloat16, ImageLayout::kNHWC, kExact)).packed_2x());
    // 5 x 2.1 = 10.5 -> 10 rows, but the rule is x 1/2.1, not x2.
    CHECK_FALSE(UpsampleProblem(d, scaled(2, 3, 5, 5, 2.1, 2.0)).packed_2x());
    CHECK_FALSE(UpsampleProblem(d, shape(2, 3, 5, 7, 10, 15)).packed_2x());
    CHECK_FALSE(UpsampleProblem(d, scaled(2, 3, 5, 7, 3, 3)).packed_2x());
  }
  UpsampleProblem copy(Direction::kBackward, scaled(1, 1, 6, 6, 1.1, 1.1));  // 6 x 1.1 = 6.6 -> 6: equal sizes
  CHECK(copy.copy());
  CHECK(copy.max_window_h() == 1);
  UpsampleProblem three(Direction::kBackward, scaled(1, 1, 5, 5, 3, 3));
  CHECK(three.max_window_h() == 3);
  CHECK(three.max_window_w() == 3);
}

TEST_CASE("unrolled windows: fixed at a uniform 3x or 4x, bounded by the longest window elsewhere, loops past 4") {
  for (NearestMode mode : {kNearest, kExact}) {
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      CHECK(UpsampleProblem(Direction::kBackward, shape(2, 3, 5, 7, 15, 21, DType::kFloat32, layout, mode))
                .uniform_window() == 3);
      CHECK(UpsampleProblem(Direction::kBackward, shape(2, 3, 5, 7, 20, 28, DType::kFloat16, layout, mode))
                .uniform_window() == 4);
      CHECK(UpsampleProblem(Direction::kForward, shape(2, 3, 5, 7, 15, 21, DType::kFloat32, layout, mode))
                .uniform_window() == 0);
    }
  }
  CHECK(UpsampleProblem(Direction::kBackward, scaled(1, 2, 9, 9, 3, 3)).uniform_window() == 3);
  // Sizes 3x, but the given factor 2.9 makes PyTorch's windows ceil(2.9 i): 29 at i = 10, not uniform (up to 9
  // rows they are).
  UpsampleNearest2d odd_factor = shape(1, 2, 9, 9, 27, 27);
  odd_factor.scale_h = odd_factor.scale_w = 2.9;
  CHECK(UpsampleProblem(Direction::kBackward, odd_factor).uniform_window() == 3);
  odd_factor = shape(1, 2, 20, 20, 60, 60);
  odd_factor.scale_h = odd_factor.scale_w = 2.9;
  CHECK(UpsampleProblem(Direction::kBackward, odd_factor).uniform_window() == 0);
  CHECK(UpsampleProblem(Direction::kBackward, shape(1, 2, 5, 5, 15, 20)).uniform_window() == 0);  // 3x by 4x
  CHECK(UpsampleProblem(Direction::kBackward, shape(1, 2, 5, 5, 25, 25)).uniform_window() == 0);  // 5x: loops
  CHECK(UpsampleProblem(Direction::kBackward, shape(1, 2, 5, 5, 16, 16)).uniform_window() == 0);  // 3.2x
  CHECK(UpsampleProblem(Direction::kBackward, shape(1, 2, 5, 5, 10, 10)).uniform_window() == 0);  // the 2x kernel
  // The default gathers with fixed windows; window=0 keeps the loops; the scatter takes none.
  const DeviceInfo dev = nominal_device(90);
  UpsampleProblem three(Direction::kBackward, shape(2, 3, 5, 8, 15, 24));
  Config gather = fam().heuristic(three, dev);
  REQUIRE(gather.at("strategy") == 0);
  REQUIRE(gather.at("window") == 1);
  CHECK(fam().check(three, gather, dev).empty());
  CHECK(fam().source(three, gather).name_expression.find("backward<float, 0, 0, 0, 3, 1, ") != std::string::npos);
  Config loops = gather;
  loops.set("window", 0);
  CHECK(fam().check(three, loops, dev).empty());
  CHECK(fam().source(three, loops).name_expression.find("backward<float, 0, 0, 0, 0, 0, ") != std::string::npos);
  Config scatter = gather;
  scatter.set("strategy", 1);
  CHECK(fam().check(three, scatter, dev).find("window=1") != std::string::npos);
  scatter.set("window", 0);
  CHECK(fam().check(three, scatter, dev).empty());
  CHECK(fam().source(three, scatter).name_expression.find("backward<float, 0, 0, 1, 0, 0, ") != std::string::npos);
  // Not uniform: windows bounded by the longest one (3.2x: 3 or 4 rows, 1.5x: 1 or 2, downsampling: 0 or 1), up to
  // 4; the default unrolls them too.
  const std::pair<UpsampleNearest2d, int> bounded[] = {
      {shape(2, 3, 5, 8, 16, 24), 4},
      {shape(2, 3, 6, 8, 9, 12, DType::kFloat16), 2},
      {shape(2, 3, 9, 8, 4, 3, DType::kFloat32, ImageLayout::kNHWC), 1}};
  for (const auto& [s, longest] : bounded) {
    UpsampleProblem b(Direction::kBackward, s);
    INFO(b.signature());
    CHECK(b.uniform_window() == 0);
    Config c = fam().heuristic(b, dev);
    CHECK(c.at("window") == 1);
    CHECK(fam().check(b, c, dev).empty());
    CHECK(fam().source(b, c).name_expression.find(", 0, " + std::to_string(longest) + ", 0, ") != std::string::npos);
  }
  // Windows of 5 keep the loops: window=1 is refused with the reason.
  UpsampleProblem five(Direction::kBackward, shape(2, 3, 5, 8, 25, 40));
  Config five_window = fam().heuristic(five, dev);
  CHECK(five_window.at("window") == 0);
  five_window.set("window", 1);
  CHECK(fam().check(five, five_window, dev).find("no window is longer than 4") != std::string::npos);
  // A window's registers: 4x4 packs of 16 bytes are 64 registers, too many for a 1024-thread block.
  UpsampleProblem wide(Direction::kBackward, shape(2, 8, 5, 8, 20, 32, DType::kFloat16, ImageLayout::kNHWC));
  Config big = fam().heuristic(wide, dev);
  REQUIRE(big.at("pack") == 8);
  CHECK(fam().check(wide, big, dev).empty());
  big.set("block", 1024);
  CHECK(fam().check(wide, big, dev).find("registers of grad_output") != std::string::npos);
}

TEST_CASE("constraints: kernel by rule, scatter only in the general backward, packs divide their row") {
  const DeviceInfo dev = nominal_device(90);
  auto legal = [&](const Problem& p) {
    std::size_t pruned = 0;
    auto c = tuner::legal_candidates(fam(), p, dev, pruned);
    CHECK(c.size() + pruned == fam().space().size());
    CHECK(c.front() == fam().heuristic(p, dev));
    return c;
  };
  UpsampleProblem fwd2x(Direction::kForward, scaled(16, 32, 80, 80, 2, 2));
  for (const Config& c : legal(fwd2x)) {
    CHECK(c.at("kernel") == 1);
    CHECK(c.at("strategy") == 0);
    CHECK(c.at("pack") <= 4);
  }
  CHECK(fam().heuristic(fwd2x, dev).at("pack") == 2);  // 8-byte loads, 16-byte pair stores
  UpsampleProblem odd(Direction::kForward, scaled(1, 3, 5, 7, 2, 2, DType::kFloat16));  // W = 7: pack 1 only
  for (const Config& c : legal(odd)) CHECK(c.at("pack") == 1);
  UpsampleProblem general_bwd(Direction::kBackward, scaled(2, 12, 9, 10, 1.5, 1.5, DType::kBFloat16,
                                                           ImageLayout::kNHWC));
  bool scatter = false, gather = false;
  for (const Config& c : legal(general_bwd)) {
    CHECK(c.at("kernel") == 0);
    CHECK(12 % c.at("pack") == 0);
    scatter |= c.at("strategy") == 1;
    gather |= c.at("strategy") == 0;
  }
  CHECK(scatter);
  CHECK(gather);
  CHECK(fam().heuristic(general_bwd, dev).at("pack") == 4);
  const Config wrong_kernel{{"kernel", 0}, {"strategy", 0}, {"pack", 4}, {"block", 256},
                            {"items", 1},  {"waves", 1},    {"cache", 0},    {"window", 0}};
  CHECK(fam().check(fwd2x, wrong_kernel, dev).find("by rule") != std::string::npos);
  Config scatter_fwd = wrong_kernel;
  scatter_fwd.set("kernel", 1);
  scatter_fwd.set("strategy", 1);
  CHECK(fam().check(fwd2x, scatter_fwd, dev).find("general backward only") != std::string::npos);
  Config wide = wrong_kernel;
  wide.set("kernel", 1);
  wide.set("pack", 8);
  CHECK(fam().check(fwd2x, wide, dev).find("16 bytes") != std::string::npos);
  // The input loads' L2 eviction priority is a forward parameter.
  Config hinted = wrong_kernel;
  hinted.set("cache", 1);
  CHECK(fam().check(general_bwd, hinted, dev).find("cache=0") != std::string::npos);
  hinted.set("kernel", 1);
  CHECK(fam().check(fwd2x, hinted, dev).empty());
  hinted.set("cache", 2);
  CHECK(fam().check(fwd2x, hinted, dev).empty());
  std::set<std::int64_t> caches;
  for (const Config& c : legal(fwd2x)) caches.insert(c.at("cache"));
  CHECK(caches == std::set<std::int64_t>{0, 1, 2});
}

TEST_CASE("pointer rule: the widest pack the shape and pointers allow, general fallback for the 2x kernel") {
  alignas(64) static char mem[512];
  UpsampleProblem fwd(Direction::kForward, scaled(1, 2, 4, 8, 2, 2));  // float, W = 8
  CHECK(templates::upsample_nearest2d::usable_pack(fwd, KernelKind::kPacked2x, Strategy::kGather, 4, mem, mem + 256) == 4);
  // The 2x forward realigns its source in registers: a source two floats off keeps pack 4, with that shift.
  CHECK(templates::upsample_nearest2d::usable_pack(fwd, KernelKind::kPacked2x, Strategy::kGather, 4, mem + 8, mem + 256) == 4);
  CHECK(templates::upsample_nearest2d::make_params(fwd, KernelKind::kPacked2x, Strategy::kGather, 4, mem + 8, mem + 256).src_shift == 2);
  CHECK(templates::upsample_nearest2d::make_params(fwd, KernelKind::kPacked2x, Strategy::kGather, 4, mem + 16, mem + 256).src_shift == 0);
  // The 2x backward reads its source in pairs of packs: those must be aligned.
  UpsampleProblem bwd2x(Direction::kBackward, scaled(1, 2, 4, 8, 2, 2));
  CHECK(templates::upsample_nearest2d::usable_pack(bwd2x, KernelKind::kPacked2x, Strategy::kGather, 4, mem + 8, mem + 256) == 1);
  CHECK(templates::upsample_nearest2d::make_params(bwd2x, KernelKind::kPacked2x, Strategy::kGather, 1, mem + 8, mem + 256).src_shift == 0);
  // Output one float off: not even pairs fit the 2x kernel; the general gather takes pack 1.
  CHECK(templates::upsample_nearest2d::usable_pack(fwd, KernelKind::kPacked2x, Strategy::kGather, 4, mem, mem + 260) == 0);
  CHECK(templates::upsample_nearest2d::usable_pack(fwd, KernelKind::kGeneral, Strategy::kGather, 4, mem, mem + 260) == 1);
  // NCHW gathers load scalars: the input pointer does not limit them.
  CHECK(templates::upsample_nearest2d::usable_pack(fwd, KernelKind::kGeneral, Strategy::kGather, 4, mem + 4, mem + 256) == 4);
  UpsampleProblem nhwc(Direction::kForward, scaled(1, 6, 4, 4, 2, 2, DType::kFloat16, ImageLayout::kNHWC));
  CHECK(templates::upsample_nearest2d::usable_pack(nhwc, KernelKind::kPacked2x, Strategy::kGather, 8, mem, mem + 256) == 2);  // 6 channels
  CHECK(templates::upsample_nearest2d::usable_pack(nhwc, KernelKind::kPacked2x, Strategy::kGather, 8, mem + 2, mem + 256) == 2);
  CHECK(templates::upsample_nearest2d::usable_pack(nhwc, KernelKind::kPacked2x, Strategy::kGather, 8, mem, mem + 258) == 1);
  UpsampleProblem bwd(Direction::kBackward, scaled(1, 1, 4, 6, 1.5, 1.5));  // out_w = 9: scatter walks rows of 9
  CHECK(templates::upsample_nearest2d::usable_pack(bwd, KernelKind::kGeneral, Strategy::kScatter, 4, mem, mem + 4) == 1);
  CHECK(templates::upsample_nearest2d::usable_pack(bwd, KernelKind::kGeneral, Strategy::kGather, 4, mem, mem + 8) == 2);
  const templates::upsample_nearest2d::Params params = templates::upsample_nearest2d::make_params(bwd, KernelKind::kGeneral, Strategy::kGather, 2, mem, mem + 8);
  CHECK(params.units == 4 * 6 / 2);
  CHECK(params.dst_numel == 24);
  CHECK(params.scale_h == 1.5f);
  CHECK(params.identity_h == 0);
}

TEST_CASE("CPU reference: forward copies the picked element, backward sums windows in float") {
  // 1 x 2 x 2 x 3 -> 3 x 4 (nearest): rows {0, 0, 1}, columns {0, 0, 1, 2}.
  UpsampleProblem fwd(Direction::kForward, shape(1, 2, 2, 3, 3, 4));
  Workload w = fam().workload(fwd, 7);
  REQUIRE(w.inputs.size() == 1);
  REQUIRE(w.inputs[0].size() == 12 * 4);
  REQUIRE(w.initial_outputs.empty());
  auto out = fam().reference(fwd, w)[0];
  const std::int64_t rows[] = {0, 0, 1}, cols[] = {0, 0, 1, 2};
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 4; ++x) {
        const double in = load_element(DType::kFloat32, w.inputs[0].data(), (c * 2 + rows[y]) * 3 + cols[x]);
        CHECK(in != 0.0);
        CHECK(load_element(DType::kFloat32, out.data(), (c * 3 + y) * 4 + x) == in);
      }
  // The same in NHWC: pixel (y, x) holds both channels of input pixel (rows[y], cols[x]).
  UpsampleProblem fwd_nhwc(Direction::kForward, shape(1, 2, 2, 3, 3, 4, DType::kFloat32, ImageLayout::kNHWC));
  auto out_nhwc = fam().reference(fwd_nhwc, w)[0];
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x)
      for (int c = 0; c < 2; ++c)
        CHECK(load_element(DType::kFloat32, out_nhwc.data(), (y * 4 + x) * 2 + c) ==
              load_element(DType::kFloat32, w.inputs[0].data(), (rows[y] * 3 + cols[x]) * 2 + c));
  // Backward 1 x 1 x 3 x 2 <- 1 x 1 x 8 x 3: row windows [0,3) [3,6) [6,8), column windows [0,2) [2,3).
  UpsampleProblem bwd(Direction::kBackward, shape(1, 1, 3, 2, 8, 3, DType::kFloat16));
  Workload g = fam().workload(bwd, 11);
  REQUIRE(g.inputs[0].size() == 24 * 2);
  REQUIRE(g.initial_outputs.size() == 1);  // the scatter strategy needs grad_input zeroed
  auto gin = fam().reference(bwd, g)[0];
  const int h0[] = {0, 3, 6, 8}, w0[] = {0, 2, 3};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      float acc = 0.0f;
      for (int y = h0[i]; y < h0[i + 1]; ++y)
        for (int x = w0[j]; x < w0[j + 1]; ++x)
          acc += static_cast<float>(load_element(DType::kFloat16, g.inputs[0].data(), y * 3 + x));
      CHECK(load_element(DType::kFloat16, gin.data(), i * 2 + j) == half_bits_to_float(float_to_half_bits(acc)));
    }
  // Exact comparisons except where the scatter may reorder a window's sum.
  CHECK(fam().output_check(fwd, 0).rtol == 0.0);
  CHECK(fam().output_check(UpsampleProblem(Direction::kBackward, scaled(1, 1, 4, 4, 2, 2)), 0).atol == 0.0);
  CHECK(fam().output_check(bwd, 0).atol > 0.0);
  // Workloads are random, never zero, and change with the seed.
  Workload w2 = fam().workload(fwd, 8);
  CHECK(w2.inputs[0] != w.inputs[0]);
}

TEST_CASE("64-bit indices by rule for tensors past 2^30 elements") {
  UpsampleProblem big(Direction::kForward, scaled(128, 256, 128, 128, 2, 2));  // 2^29 in, 2^31 out
  CHECK(big.index64());
  CHECK(fam().source(big, fam().heuristic(big, nominal_device(90))).name_expression.find("long long") !=
        std::string::npos);
  UpsampleProblem small(Direction::kForward, scaled(8, 256, 128, 128, 2, 2));
  CHECK_FALSE(small.index64());
}

TEST_CASE("the default suite: the 12 public cases, their NHWC twins, 4 general scales and 4 misaligned views") {
  auto suite = fam().default_suite();
  REQUIRE(suite.size() == 32);
  CHECK(suite[0].first == "upsample2x_fwd_float32_16x32x80x80");
  CHECK(suite[5].first == "upsample2x_bwd_float32_8x256x128x128");
  CHECK(suite[12].first == "upsample2x_fwd_float32_16x32x80x80_nhwc");
  // The views' classes: the offset's bytes' largest power-of-two divisor (2 for one float16, 4 for one float32, 2
  // for three float16: 6 bytes).
  const std::pair<const char*, int> views[] = {{"upsample2x_fwd_float16_8x256x128x128_src+1", 2},
                                               {"upsample2x_fwd_float16_8x256x128x128_nhwc_src+1", 2},
                                               {"upsample2x_fwd_float32_8x256x128x128_src+1", 4},
                                               {"upsample2x_fwd_float16_2x640x64x64_src+3", 2}};
  for (std::size_t i = 0; i < suite.size(); ++i) {
    auto p = fam().parse_problem(suite[i].second);
    INFO(suite[i].first);
    CHECK(p->signature() == suite[i].second);
    const auto& u = static_cast<const UpsampleProblem&>(*p);
    CHECK(u.packed_2x() == (i < 24 || i >= 28));
    if (i < 28) {
      CHECK(u.src_align() == 16);
      continue;
    }
    CHECK(suite[i].first == views[i - 28].first);
    CHECK(u.src_align() == views[i - 28].second);
    CHECK(suite[i].second.rfind("align=" + std::to_string(views[i - 28].second) + ";", 0) == 0);
    // The same problem as its aligned base case but for the class.
    const std::string base(views[i - 28].first, std::string_view(views[i - 28].first).rfind("_src+"));
    const auto at = std::find_if(suite.begin(), suite.end(), [&](const auto& c) { return c.first == base; });
    REQUIRE(at != suite.end());
    CHECK(suite[i].second.substr(suite[i].second.find(';') + 1) == at->second);
  }
}

TEST_CASE("alignment classes: an exact 2x forward's misaligned input is a problem of its own, others are not") {
  const DeviceInfo dev = nominal_device(90);
  const UpsampleProblem fwd(Direction::kForward, scaled(2, 640, 64, 64, 2, 2, DType::kFloat16));
  auto refine = [&](const Problem& p, std::uint8_t src, std::uint8_t dst) {
    const std::uint8_t classes[] = {src, dst};
    return fam().with_alignment(p, classes);
  };
  CHECK(refine(fwd, 16, 16) == nullptr);
  const auto view = refine(fwd, 2, 16);
  REQUIRE(view != nullptr);
  CHECK(view->signature() == "align=2;" + fwd.signature());
  CHECK(fam().parse_problem(view->signature())->signature() == view->signature());
  CHECK(view->group() == fwd.group());
  CHECK(view->features() == fwd.features());  // the aligned record is the nearest, and legal for the class
  CHECK(fam().buffers(*view)[0].placement == 2);
  CHECK(fam().buffers(*view)[1].placement == 16);
  // The realigning kernel runs every config of the aligned problem: the same legal space.
  std::size_t pruned_a = 0, pruned_v = 0;
  CHECK(tuner::legal_candidates(fam(), fwd, dev, pruned_a) == tuner::legal_candidates(fam(), *view, dev, pruned_v));
  CHECK(refine(fwd, 8, 16)->signature().starts_with("align=8;"));
  // A misaligned output, a backward, a general scale: the aligned problem at its variant.
  CHECK(refine(fwd, 2, 4) == nullptr);
  CHECK(refine(UpsampleProblem(Direction::kBackward, scaled(2, 640, 64, 64, 2, 2, DType::kFloat16)), 2, 16) ==
        nullptr);
  CHECK(refine(UpsampleProblem(Direction::kForward, scaled(2, 64, 64, 64, 1.5, 1.5, DType::kFloat16)), 2, 16) ==
        nullptr);
  CHECK(refine(UpsampleProblem(Direction::kForward, scaled(2, 64, 64, 64, 2, 2)), 2, 16) == nullptr);  // < float
  // Bad classes and classes of other problems are refused with the reason.
  auto with_align = [&](const std::string& align, const std::string& dir, const std::string& scale) {
    return fam().make_problem({{"align", align}, {"direction", dir}, {"dtype", "float16"}, {"n", "2"}, {"c", "8"},
                               {"in_h", "8"}, {"in_w", "8"}, {"scale_h", scale}, {"scale_w", scale}});
  };
  CHECK(with_align("2", "forward", "2")->signature().starts_with("align=2;"));
  CHECK_THROWS_WITH_AS(with_align("3", "forward", "2"), doctest::Contains("align 3 is not an alignment class"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(with_align("32", "forward", "2"), doctest::Contains("align=32"), InvalidArgument);
  CHECK_THROWS_WITH_AS(with_align("2", "backward", "2"), doctest::Contains("only for an exact 2x forward"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(with_align("2", "forward", "3"), doctest::Contains("only for an exact 2x forward"),
                       InvalidArgument);
}

TEST_CASE("NVRTC compiles the space for sm_80 and sm_90: every kernel, both layouts, every dtype") {
  Compiler compiler;
  struct Case {
    Direction direction;
    UpsampleNearest2d shape;
    int cc;
  };
  UpsampleNearest2d exact_nhwc = scaled(2, 8, 5, 6, 1.5, 0.5, DType::kBFloat16, ImageLayout::kNHWC);
  exact_nhwc.mode = kExact;
  const Case cases[] = {
      {Direction::kForward, scaled(2, 3, 8, 8, 2, 2), 90},                                          // 2x NCHW
      {Direction::kForward, scaled(2, 8, 5, 7, 2, 2, DType::kFloat16, ImageLayout::kNHWC), 80},     // 2x NHWC
      {Direction::kForward, scaled(2, 3, 5, 8, 1.5, 3, DType::kBFloat16), 80},                      // general NCHW
      {Direction::kForward, exact_nhwc, 90},                                                        // general NHWC
      {Direction::kBackward, scaled(2, 3, 8, 8, 2, 2, DType::kFloat16), 80},                        // 2x NCHW
      {Direction::kBackward, scaled(2, 8, 5, 7, 2, 2, DType::kBFloat16, ImageLayout::kNHWC), 90},   // 2x NHWC
      {Direction::kBackward, scaled(2, 3, 5, 8, 1.5, 1.5), 90},                 // gather + scatter NCHW
      {Direction::kBackward, exact_nhwc, 80},                                    // gather + scatter NHWC, bf16
      {Direction::kBackward, scaled(2, 3, 5, 8, 3, 3), 90},                     // fixed 3x3 windows NCHW
      {Direction::kBackward, scaled(2, 8, 5, 8, 4, 4, DType::kFloat16, ImageLayout::kNHWC), 80},  // 4x4 NHWC
  };
  for (const Case& c : cases) {
    UpsampleProblem p(c.direction, c.shape);
    auto r = tuner::dry_run(compiler, fam(), p, nominal_device(c.cc), 0);
    INFO("sm_", c.cc, " ", p.signature());
    REQUIRE(!r.candidates.empty());
    for (const auto& cand : r.candidates) {
      INFO(cand.config.text(), "\n", cand.reason);
      CHECK(cand.status == "ok");
      CHECK(cand.resources.registers > 0);
      CHECK(cand.resources.spill_store_bytes == 0);
    }
  }
}

}  // namespace jitune
