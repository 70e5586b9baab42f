// GPU tests of upsample_nearest2d and its backward through the runtime API: random shapes at scales 2, 3, 1.5, 0.5
// and odd output sizes, both layouts, both modes, every dtype, against the CPU reference with poisoned outputs and
// guard bytes; misaligned pointers; the scatter strategy through a stored record; every config of the space through
// the tuner's verification; a misaligned input's alignment class decided and tuned on its own; zero-size and 1x1
// images; the 64-bit index path; bad input; the tuned pick. With
// JITUNE_UPSAMPLE_TORCH_DUMP=<file> it also writes a few hundred random calls for bench/peer/upsample_nearest2d.py
// --check, which compares them with PyTorch on the same machine.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include <jitune/jitune.hpp>
#include <jitune/tuner.hpp>

#include "gpu_util.hpp"
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"
#include "tuner/measure.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using test::Buffer;
using test::TempDir;
using templates::upsample_nearest2d::Direction;
using templates::upsample_nearest2d::UpsampleProblem;

const Family& fam() { return templates::upsample_nearest2d::upsample_nearest2d_family(); }

UpsampleNearest2d make_shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, DType dtype,
                             ImageLayout layout, NearestMode mode) {
  UpsampleNearest2d s;
  s.n = n;
  s.c = c;
  s.in_h = h;
  s.in_w = w;
  s.dtype = dtype;
  s.layout = layout;
  s.mode = mode;
  return s;
}

std::string describe(Direction d, const UpsampleNearest2d& s) {
  return UpsampleProblem(d, s).signature();
}

void call(Runtime& rt, Direction d, const UpsampleNearest2d& s, const void* src, void* dst, Stream stream = nullptr) {
  if (d == Direction::kForward) upsample_nearest2d(rt, s, src, dst, stream);
  else upsample_nearest2d_backward(rt, s, src, dst, stream);
}

// One call through the public op on random data at element offsets, compared element by element with the CPU
// reference (the family's tolerance: exact unless a scatter may reorder a sum); the bytes around the destination
// must stay poisoned.
void check_call(Runtime& rt, Direction d, const UpsampleNearest2d& s, std::uint64_t seed, std::size_t src_off = 0,
                std::size_t dst_off = 0) {
  const UpsampleProblem p(d, s);
  const std::size_t es = dtype_size(s.dtype);
  const auto src = templates::upsample_nearest2d::random_source(p, seed);
  const auto expected = templates::upsample_nearest2d::reference_output(p, src);
  Buffer in(src.size() + src_off * es), out(expected.size() + dst_off * es);
  in.poison();  // NaN around the source: a read outside it (or a wrong realignment) shows in the result
  in.upload(src, src_off * es);
  out.poison();
  call(rt, d, s, in.at(src_off * es), out.at(dst_off * es));
  JITUNE_CU_CHECK(cuCtxSynchronize());
  const auto got = out.download(expected.size(), dst_off * es);
  const OutputCheck check = fam().output_check(p, 0);
  const auto count = static_cast<std::uint64_t>(p.dst_numel());
  const CompareResult r = compare_host(check, got.data(), expected.data(), count);
  INFO(p.signature(), " offsets src=", src_off, " dst=", dst_off);
  CHECK_MESSAGE(r.ok(), r.describe(count, check));
  for (std::byte b : out.download(dst_off * es, 0)) REQUIRE(b == std::byte{0xFF});
  const std::size_t end = dst_off * es + expected.size();
  for (std::byte b : out.download(out.bytes - end, end)) REQUIRE(b == std::byte{0xFF});
}

}  // namespace

TEST_CASE("random shapes at scales 2, 3, 1.5, 0.5 and odd sizes: both layouts, modes and directions, every dtype") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937_64 rng(20261121);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const double factors[] = {2.0, 3.0, 1.5, 0.5};
  std::uint64_t seed = 100;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC})
      for (NearestMode mode : {NearestMode::kNearest, NearestMode::kNearestExact})
        for (int variant = 0; variant < 6; ++variant) {
          // Channels and widths vary so every pack width and the scalar paths run.
          UpsampleNearest2d s = make_shape(pick(1, 3), variant % 2 ? pick(1, 7) : 8 * pick(1, 3), pick(1, 23),
                                           variant % 3 ? pick(1, 29) : 8 * pick(1, 5), dtype, layout, mode);
          if (variant < 4) {
            s.scale_h = s.scale_w = factors[variant];
            if (s.in_h * factors[variant] < 1) s.in_h = 2;
            if (s.in_w * factors[variant] < 1) s.in_w = 2;
          } else if (variant == 4) {  // odd output sizes, not multiples of the input
            s.out_h = 2 * s.in_h + 1;
            s.out_w = pick(1, 61);
          } else {  // mixed: a factor for the height, a size for the width
            s.scale_h = 1.0 + static_cast<double>(pick(1, 30)) / 16.0;
            s.out_w = pick(1, 45);
          }
          for (Direction d : {Direction::kForward, Direction::kBackward}) check_call(rt, d, s, ++seed);
        }
}

TEST_CASE("the packed 2x kernels at the public shapes' widths, and their vector widths by pointer alignment") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::uint64_t seed = 500;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
      UpsampleNearest2d s = make_shape(3, 32, 20, 40, dtype, layout, NearestMode::kNearest);
      s.scale_h = s.scale_w = 2.0;
      for (Direction d : {Direction::kForward, Direction::kBackward}) {
        REQUIRE(UpsampleProblem(d, s).packed_2x());
        check_call(rt, d, s, ++seed);
        check_call(rt, d, s, ++seed, 1, 0);  // source one element off: realigned (forward), narrower (backward)
        check_call(rt, d, s, ++seed, 0, 1);  // destination one element off (NCHW: the general gather)
        check_call(rt, d, s, ++seed, 3, 5);
      }
      // The forward at every source offset within a 16-byte pack, shapes with one unit and two units too.
      const std::size_t per_pack = 16 / dtype_size(dtype);
      for (std::size_t off = 1; off < per_pack; ++off) check_call(rt, Direction::kForward, s, ++seed, off, 0);
      UpsampleNearest2d tiny = make_shape(1, layout == ImageLayout::kNHWC ? per_pack : 1, 1,
                                          layout == ImageLayout::kNHWC ? 1 : per_pack, dtype, layout,
                                          NearestMode::kNearest);
      tiny.scale_h = tiny.scale_w = 2.0;
      for (std::size_t off = 1; off < per_pack; ++off) check_call(rt, Direction::kForward, tiny, ++seed, off, 0);
      tiny.in_h = 2;
      for (std::size_t off = 1; off < per_pack; ++off) check_call(rt, Direction::kForward, tiny, ++seed, off, 0);
      UpsampleNearest2d sized = make_shape(2, 5, 7, 9, dtype, layout, NearestMode::kNearestExact);
      sized.out_h = 14;
      sized.out_w = 18;  // 2x given as a size
      for (Direction d : {Direction::kForward, Direction::kBackward}) check_call(rt, d, sized, ++seed);
    }
}

TEST_CASE("1x1 images, equal sizes (a copy), downsampling to 1x1, and odd general shapes with misaligned pointers") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::uint64_t seed = 900;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC})
      for (Direction d : {Direction::kForward, Direction::kBackward}) {
        UpsampleNearest2d one = make_shape(2, 3, 1, 1, dtype, layout, NearestMode::kNearest);
        one.out_h = one.out_w = 1;
        check_call(rt, d, one, ++seed);
        one.out_h = 3;
        one.out_w = 5;
        check_call(rt, d, one, ++seed);
        UpsampleNearest2d same = make_shape(2, 3, 7, 5, dtype, layout, NearestMode::kNearestExact);
        same.scale_h = same.scale_w = 1.1;  // 7 x 1.1 -> 7, 5 x 1.1 -> 5: PyTorch copies
        check_call(rt, d, same, ++seed, 1, 3);
        UpsampleNearest2d down = make_shape(1, 4, 6, 9, dtype, layout, NearestMode::kNearestExact);
        down.out_h = down.out_w = 1;
        check_call(rt, d, down, ++seed);
        UpsampleNearest2d odd = make_shape(3, 6, 13, 11, dtype, layout, NearestMode::kNearest);
        odd.out_h = 29;
        odd.out_w = 17;
        check_call(rt, d, odd, ++seed, 1, 1);
        check_call(rt, d, odd, ++seed, 2, 3);
      }
}

TEST_CASE("an exact 2x forward's misaligned input is decided for its class; the tuner places the input there") {
  TempDir dir;
  RuntimeOptions o = test::isolated_options(dir);
  o.tuning = tuner::tune_on_first_use({6, 0.2});
  Runtime rt(o);
  const UpsampleNearest2d s = [] {
    UpsampleNearest2d x = make_shape(2, 24, 20, 24, DType::kFloat16, ImageLayout::kNCHW, NearestMode::kNearest);
    x.scale_h = x.scale_w = 2.0;
    return x;
  }();
  const std::string plain = describe(Direction::kForward, s);
  auto stored = [&] { return test::stored_signatures(dir, "upsample_nearest2d"); };
  check_call(rt, Direction::kForward, s, 1);  // aligned: the plain problem only
  CHECK(stored() == std::set<std::string>{plain});
  check_call(rt, Direction::kForward, s, 2, 1);  // one element off: its class, tuned and stored apart
  CHECK(stored() == std::set<std::string>{plain, "align=2;" + plain});
  check_call(rt, Direction::kForward, s, 3, 3);  // three off: the same class, nothing new
  check_call(rt, Direction::kForward, s, 4, 2);  // two off (4 bytes): another class
  CHECK(stored() == std::set<std::string>{plain, "align=2;" + plain, "align=4;" + plain});
  check_call(rt, Direction::kForward, s, 5, 1, 1);  // the output off too: the aligned problem at its variant
  check_call(rt, Direction::kBackward, s, 6, 1);    // a backward: the same
  CHECK(stored().size() == 4);  // the backward's plain problem
  Runtime plain_rt(test::isolated_options(dir));
  CHECK(plain_rt.explain("upsample_nearest2d", "align=2;" + plain).level == MatchLevel::kExact);
  check_call(plain_rt, Direction::kForward, s, 7, 3);
  // The tuner's workload puts the input at the class's offset.
  const auto p = fam().parse_problem("align=2;" + plain);
  const Workload w = fam().workload(*p, 5);
  tuner::DeviceWorkload dw(fam(), *p, w, fam().reference(*p, w));
  const Bindings b = dw.bindings({});
  CHECK(reinterpret_cast<std::uintptr_t>(b.pointers[0]) % 16 == 2);
  CHECK(reinterpret_cast<std::uintptr_t>(b.pointers[1]) % 16 == 0);
}

TEST_CASE("zero-size batches launch nothing; the call is still validated") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer out(64);
  out.poison();
  UpsampleNearest2d s = make_shape(0, 3, 4, 4, DType::kFloat32, ImageLayout::kNCHW, NearestMode::kNearest);
  s.scale_h = s.scale_w = 2.0;
  upsample_nearest2d(rt, s, nullptr, nullptr);
  upsample_nearest2d_backward(rt, s, out.at(0), out.at(0));
  s.n = 2;
  s.c = 0;
  upsample_nearest2d(rt, s, out.at(0), out.at(0));
  JITUNE_CU_CHECK(cuCtxSynchronize());
  for (std::byte b : out.download(64, 0)) CHECK(b == std::byte{0xFF});
  s.scale_h = -1.0;
  CHECK_THROWS_AS(upsample_nearest2d(rt, s, nullptr, nullptr), InvalidArgument);
}

TEST_CASE("the scatter strategy (fast atomic add) through a stored record, every dtype and layout") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::uint64_t seed = 1300;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC})
      for (double factor : {3.0, 1.5, 0.5}) {
        UpsampleNearest2d s = make_shape(2, 6, 9, 12, dtype, layout, NearestMode::kNearestExact);
        s.scale_h = s.scale_w = factor;
        const UpsampleProblem p(Direction::kBackward, s);
        cache::Record rec;
        const Config config{{"kernel", 0}, {"strategy", 1}, {"pack", 2}, {"block", 128},
                            {"items", 2},  {"waves", 2},    {"cache", 0},    {"window", 0}};
        rec.key = internal::impl(rt).record_key(fam(), p, config);
        rec.group = p.group();
        rec.features = p.features();
        rec.config = config.text();
        rec.time_us = 1;
        rec.reps = 1;
        rec.created_at = "2026-11-21T00:00:00Z";
        internal::impl(rt).user_store->put(rec);
        rt.reload();
        REQUIRE(rt.explain("upsample_nearest2d", p.signature()).config == rec.config);
        check_call(rt, Direction::kBackward, s, ++seed);        // grad_input is zeroed before the atomics
        check_call(rt, Direction::kBackward, s, ++seed, 1, 1);  // odd pointers: scalar loads, unpaired atomics
      }
}

TEST_CASE("every config of the space verifies (tuner verification path, gather and scatter)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::vector<std::pair<Direction, UpsampleNearest2d>> problems;
  UpsampleNearest2d fwd2x = make_shape(2, 5, 9, 24, DType::kFloat16, ImageLayout::kNCHW, NearestMode::kNearest);
  fwd2x.scale_h = fwd2x.scale_w = 2.0;
  problems.push_back({Direction::kForward, fwd2x});
  problems.push_back({Direction::kBackward, fwd2x});
  UpsampleNearest2d general =
      make_shape(2, 8, 11, 12, DType::kBFloat16, ImageLayout::kNHWC, NearestMode::kNearestExact);
  general.scale_h = 1.5;
  general.scale_w = 3.0;
  problems.push_back({Direction::kForward, general});
  problems.push_back({Direction::kBackward, general});
  // Uniform 3x and 4x: the gather's fixed windows (odd widths: every pack's scalar loads of grad_output); the
  // general problem above and the downsampling one below run its bounded windows (window=1).
  UpsampleNearest2d three = make_shape(2, 3, 7, 12, DType::kFloat32, ImageLayout::kNCHW, NearestMode::kNearest);
  three.scale_h = three.scale_w = 3.0;
  problems.push_back({Direction::kBackward, three});
  UpsampleNearest2d four = make_shape(2, 16, 5, 3, DType::kFloat16, ImageLayout::kNHWC, NearestMode::kNearestExact);
  four.scale_h = four.scale_w = 4.0;
  problems.push_back({Direction::kBackward, four});
  REQUIRE(UpsampleProblem(Direction::kBackward, three).uniform_window() == 3);
  REQUIRE(UpsampleProblem(Direction::kBackward, four).uniform_window() == 4);
  UpsampleNearest2d down = make_shape(3, 5, 17, 16, DType::kFloat32, ImageLayout::kNCHW, NearestMode::kNearest);
  down.out_h = 7;
  down.out_w = 40;
  problems.push_back({Direction::kBackward, down});
  for (const auto& [d, s] : problems) {
    const UpsampleProblem p(d, s);
    tuner::TuneOptions opt;
    opt.min_time_ms = 0.05;
    opt.min_reps = 3;
    opt.store = false;
    opt.cut_ratio = 1e9;  // time every candidate: none may be cut, all must verify
    tuner::TuneReport r = tuner::tune(rt, fam(), p, opt);
    INFO(p.signature());
    CHECK(r.candidates.size() > 40);
    for (const auto& c : r.candidates) {
      INFO(c.config.text(), " ", c.reason);
      CHECK((c.status == "ok" || c.status == "resources_exceeded"));
    }
  }
}

TEST_CASE("64-bit indices: tensors past 2^30 elements, forward and backward") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  // 1 x 257 x 1024 x 1024 half -> 2048 x 2048: 2^30 + 2^22 output elements (2.1 GB). Checked on a sample and
  // over the whole last megabyte, where 32-bit indices would wrap.
  for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
    UpsampleNearest2d s = make_shape(1, 257, 1024, 1024, DType::kFloat16, layout, NearestMode::kNearest);
    s.scale_h = s.scale_w = 2.0;
    const UpsampleProblem fwd(Direction::kForward, s);
    REQUIRE(fwd.index64());
    const auto src = templates::upsample_nearest2d::random_source(fwd, 77);
    Buffer in(src.size(), 0), out(static_cast<std::size_t>(fwd.out_numel()) * 2, 0);
    in.upload(src, 0);
    out.poison();
    upsample_nearest2d(rt, s, in.at(0), out.at(0));
    JITUNE_CU_CHECK(cuCtxSynchronize());
    const auto got = out.download(out.bytes, 0);
    const std::int64_t c = 257, h = 1024, w = 1024;
    auto src_of = [&](std::int64_t o) {  // output element -> input element (x2 rule)
      if (layout == ImageLayout::kNCHW) {
        const std::int64_t x = o % (2 * w), y = o / (2 * w) % (2 * h), ch = o / (4 * h * w);
        return (ch * h + y / 2) * w + x / 2;
      }
      const std::int64_t ch = o % c, x = o / c % (2 * w), y = o / c / (2 * w);
      return ((y / 2) * w + x / 2) * c + ch;
    };
    std::mt19937_64 rng(5);
    const std::int64_t total = fwd.out_numel();
    std::int64_t bad = 0;
    auto check_at = [&](std::int64_t o) {
      std::uint16_t g, e;
      std::memcpy(&g, got.data() + o * 2, 2);
      std::memcpy(&e, src.data() + src_of(o) * 2, 2);
      bad += g != e;
    };
    for (int k = 0; k < 1000000; ++k) check_at(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(total)));
    for (std::int64_t o = total - (1 << 19); o < total; ++o) check_at(o);
    INFO(describe(Direction::kForward, s));
    CHECK(bad == 0);

    // Backward of the same shape: grad_input element = the sum of its 2x2 block, in float, rounded once.
    Buffer grad_in(src.size(), 0);
    grad_in.poison();
    upsample_nearest2d_backward(rt, s, out.at(0), grad_in.at(0));
    JITUNE_CU_CHECK(cuCtxSynchronize());
    const auto gi = grad_in.download(grad_in.bytes, 0);
    std::int64_t bad_bwd = 0;
    auto value = [&](const std::vector<std::byte>& b, std::int64_t i) {
      std::uint16_t bits;
      std::memcpy(&bits, b.data() + i * 2, 2);
      return half_bits_to_float(bits);
    };
    auto check_in = [&](std::int64_t i) {
      // Every output of the block copies input i, so the sum is 4 * x[i] exactly.
      bad_bwd += value(gi, i) != half_bits_to_float(float_to_half_bits(4.0f * value(src, i)));
    };
    const std::int64_t in_total = fwd.in_numel();
    for (int k = 0; k < 1000000; ++k) check_in(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(in_total)));
    for (std::int64_t i = in_total - (1 << 18); i < in_total; ++i) check_in(i);
    CHECK(bad_bwd == 0);
  }
}

TEST_CASE("launches go on the caller's stream") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  driver::StreamHandle stream;
  UpsampleNearest2d s = make_shape(4, 16, 64, 64, DType::kFloat32, ImageLayout::kNCHW, NearestMode::kNearest);
  s.scale_h = s.scale_w = 2.0;
  const UpsampleProblem p(Direction::kForward, s);
  const auto src = templates::upsample_nearest2d::random_source(p, 3);
  const auto expected = templates::upsample_nearest2d::reference_output(p, src);
  Buffer in(src.size()), out(expected.size());
  in.upload(src, 0);
  out.poison();
  upsample_nearest2d(rt, s, in.at(0), out.at(0), reinterpret_cast<Stream>(stream.get()));
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  CHECK(out.download(expected.size(), 0) == expected);
}

TEST_CASE("bad input is a clear error") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer b(1 << 16);
  UpsampleNearest2d s = make_shape(1, 2, 4, 4, DType::kFloat32, ImageLayout::kNCHW, NearestMode::kNearest);
  s.scale_h = s.scale_w = 2.0;
  auto message = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no exception";
  };
  CHECK(message([&] { upsample_nearest2d(rt, s, nullptr, b.at(0)); }).find("input pointer is null") !=
        std::string::npos);
  CHECK(message([&] { upsample_nearest2d(rt, s, b.at(2), b.at(4096)); }).find("not aligned") != std::string::npos);
  CHECK(message([&] { upsample_nearest2d(rt, s, b.at(0), b.at(64)); }).find("overlap") != std::string::npos);
  CHECK(message([&] { upsample_nearest2d_backward(rt, s, b.at(0), nullptr); }).find("grad_input pointer is null") !=
        std::string::npos);
  UpsampleNearest2d bad = s;
  bad.scale_w = 0.0;
  CHECK(message([&] { upsample_nearest2d(rt, bad, b.at(0), b.at(4096)); }).find("positive finite") !=
        std::string::npos);
  bad = s;
  bad.scale_h.reset();
  CHECK(message([&] { upsample_nearest2d(rt, bad, b.at(0), b.at(4096)); }).find("both missing") != std::string::npos);
  bad = s;
  bad.in_h = 0;
  CHECK(message([&] { upsample_nearest2d(rt, bad, b.at(0), b.at(4096)); }).find("at least 1x1") != std::string::npos);
  bad = s;
  bad.dtype = DType::kFloat64;
  CHECK(message([&] { upsample_nearest2d(rt, bad, b.at(0), b.at(4096)); }).find("not supported") != std::string::npos);
  bad = s;
  bad.scale_h = 0.2;  // 4 x 0.2 -> 0 rows
  CHECK(message([&] { upsample_nearest2d_backward(rt, bad, b.at(0), b.at(4096)); }).find("output size of 0") !=
        std::string::npos);
}

TEST_CASE("the tuned pick: a tuned record is used exactly, by a new Runtime, without NVRTC") {
  TempDir dir;
  UpsampleNearest2d s = make_shape(4, 32, 40, 40, DType::kFloat16, ImageLayout::kNHWC, NearestMode::kNearest);
  s.scale_h = s.scale_w = 2.0;
  const std::string sig = upsample_nearest2d_signature(s, true);
  std::string tuned;
  {
    Runtime rt(test::isolated_options(dir));
    auto problem = fam().parse_problem(sig);
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kRandom;
    opt.budget = 12;
    opt.min_time_ms = 0.2;
    tuner::TuneReport r = tuner::tune(rt, fam(), *problem, opt);
    CHECK(r.stored);
    CHECK(r.best_us > 0);
    CHECK(r.default_us > 0);
    tuned = r.best.text();
  }
  Runtime rt(test::isolated_options(dir));
  Explanation x = rt.explain("upsample_nearest2d", sig);
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.config == tuned);
  check_call(rt, Direction::kBackward, s, 4242);
  CHECK(internal::impl(rt).compiler.compile_count() == 0);  // the winner's binary came from the disk cache
  UpsampleNearest2d other = s;
  other.n = 6;
  Explanation near = rt.explain("upsample_nearest2d", upsample_nearest2d_signature(other, true));
  CHECK(near.level == MatchLevel::kNearestProblem);
  CHECK(near.config == tuned);
}

// Not a check by itself: writes random calls (inputs and jitune's results) for the PyTorch comparison that
// bench/peer/upsample_nearest2d.py --check runs on the device. Does nothing unless JITUNE_UPSAMPLE_TORCH_DUMP is set.
TEST_CASE("dump random calls for the comparison with PyTorch" *
          doctest::skip(std::getenv("JITUNE_UPSAMPLE_TORCH_DUMP") == nullptr)) {  // reported as skipped without it
  const char* path = std::getenv("JITUNE_UPSAMPLE_TORCH_DUMP");
  REQUIRE(path != nullptr);
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::ofstream index(std::string(path) + ".jsonl"), blob(std::string(path) + ".bin", std::ios::binary);
  REQUIRE(index);
  REQUIRE(blob);
  std::uint64_t offset = 0;
  auto write = [&](const std::vector<std::byte>& bytes) {
    blob.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    const std::uint64_t at = offset;
    offset += bytes.size();
    return at;
  };
  // Each case runs the forward on a random input and the backward on a random grad_output.
  auto run = [&](const UpsampleNearest2d& s, const char* how) {
    const UpsampleProblem fwd(Direction::kForward, s), bwd(Direction::kBackward, s);
    const auto x = templates::upsample_nearest2d::random_source(fwd, offset + 1), g = templates::upsample_nearest2d::random_source(bwd, offset + 2);
    Buffer bx(x.size()), by(static_cast<std::size_t>(fwd.out_numel()) * dtype_size(s.dtype)), bg(g.size()),
        bgi(x.size());
    bx.upload(x, 0);
    bg.upload(g, 0);
    by.poison();
    bgi.poison();
    upsample_nearest2d(rt, s, bx.at(0), by.at(0));
    upsample_nearest2d_backward(rt, s, bg.at(0), bgi.at(0));
    JITUNE_CU_CHECK(cuCtxSynchronize());
    const UpsampleNearest2d& r = fwd.shape();
    char line[1024];
    auto scale = [](const std::optional<double>& v) {
      char b[40];
      if (v) std::snprintf(b, sizeof b, "%.17g", *v);
      else std::snprintf(b, sizeof b, "null");
      return std::string(b);
    };
    const std::uint64_t ox = write(x), oy = write(by.download(by.bytes - 64, 0)), og = write(g),
                        ogi = write(bgi.download(bgi.bytes - 64, 0));
    std::snprintf(line, sizeof line,
                  "{\"how\": \"%s\", \"n\": %lld, \"c\": %lld, \"in_h\": %lld, \"in_w\": %lld, \"out_h\": %lld, "
                  "\"out_w\": %lld, \"scale_h\": %s, \"scale_w\": %s, \"layout\": \"%s\", \"mode\": \"%s\", "
                  "\"dtype\": \"%s\", \"x\": %llu, \"y\": %llu, \"g\": %llu, \"gi\": %llu}\n",
                  how, static_cast<long long>(r.n), static_cast<long long>(r.c), static_cast<long long>(r.in_h),
                  static_cast<long long>(r.in_w), static_cast<long long>(r.out_h), static_cast<long long>(r.out_w),
                  scale(s.scale_h).c_str(), scale(s.scale_w).c_str(), std::string(image_layout_name(s.layout)).c_str(),
                  std::string(nearest_mode_name(s.mode)).c_str(), std::string(dtype_name(s.dtype)).c_str(),
                  static_cast<unsigned long long>(ox), static_cast<unsigned long long>(oy),
                  static_cast<unsigned long long>(og), static_cast<unsigned long long>(ogi));
    index << line;
  };
  std::mt19937_64 rng(7);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const double factors[] = {2.0, 3.0, 1.5, 0.5, 1.25, 0.75, 2.5, 4.0, 1.0 / 3.0, 7.0 / 3.0};
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  int cases = 0;
  for (int k = 0; k < 360; ++k) {
    UpsampleNearest2d s = make_shape(pick(1, 2), pick(1, 9), pick(1, 40), pick(1, 40), dtypes[k % 3],
                                     k % 2 ? ImageLayout::kNHWC : ImageLayout::kNCHW,
                                     (k / 2) % 2 ? NearestMode::kNearestExact : NearestMode::kNearest);
    const char* how = "size";
    switch (k % 5) {
      case 0:
      case 1: {  // scale factors from the list or random, as F.interpolate(scale_factor=...)
        const auto f = [&] {
          return pick(0, 1) ? factors[pick(0, 9)] : std::uniform_real_distribution<double>(0.3, 4.2)(rng);
        };
        s.scale_h = f();
        s.scale_w = f();
        if (templates::upsample_nearest2d::derived_size(s.in_h, *s.scale_h) < 1) s.in_h = 4;
        if (templates::upsample_nearest2d::derived_size(s.in_w, *s.scale_w) < 1) s.in_w = 4;
        how = "scale";
        break;
      }
      case 4:  // aten's contract: a size and a factor together
        s.out_h = pick(1, 90);
        s.out_w = pick(1, 90);
        s.scale_h = std::uniform_real_distribution<double>(0.3, 4.2)(rng);
        s.scale_w = factors[pick(0, 9)];
        how = "both";
        break;
      default:  // F.interpolate(size=...)
        s.out_h = pick(1, 90);
        s.out_w = pick(1, 90);
        break;
    }
    run(s, how);
    ++cases;
  }
  // Sizes where PyTorch's float steps round unevenly (its backward is then not the forward's adjoint; nvcc's FMA
  // decides nearest-exact's backward windows): 2 -> 82, 2 -> 41, 6 -> 1, 12 -> 2, 14 -> 20.
  const std::pair<int, int> edges[] = {{2, 82}, {2, 41}, {6, 1}, {12, 2}, {14, 20}, {3, 7}, {7, 3}};
  for (const auto& [in, out] : edges)
    for (NearestMode mode : {NearestMode::kNearest, NearestMode::kNearestExact})
      for (ImageLayout layout : {ImageLayout::kNCHW, ImageLayout::kNHWC}) {
        UpsampleNearest2d s = make_shape(1, 5, in, in, DType::kFloat32, layout, mode);
        s.out_h = s.out_w = out;
        run(s, "size");
        ++cases;
      }
  MESSAGE("wrote ", cases, " cases to ", path, ".jsonl / .bin");
}

}  // namespace jitune
