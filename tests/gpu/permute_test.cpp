// GPU tests of the permute family: every permutation of small odd shapes and the bench's 5-d shape at every
// element size through the runtime API (poisoned outputs, misaligned pointers, CPU reference), every legal
// config through the tuner's verification path, zero-size and identity calls, bad input, the tuned pick, and
// the 64-bit index path on a tensor of about 3 GiB.
#include <jitune/jitune.hpp>
#include <jitune/tuner.hpp>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "gpu_util.hpp"
#include "templates/permute/permute.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using test::Buffer;
using test::TempDir;

std::string text(const std::vector<std::int64_t>& shape, const std::vector<int>& perm) {
  std::string s = "shape (";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  s += ") perm (";
  for (std::size_t i = 0; i < perm.size(); ++i) s += (i ? "," : "") + std::to_string(perm[i]);
  return s + ")";
}

// One call through jitune::permute on random input at element offsets (src_off, dst_off) into a poisoned
// output; every byte must match the CPU reference and the bytes around the output must stay poisoned.
void check_permute(Runtime& rt, DType dtype, const std::vector<std::int64_t>& shape,
                   const std::vector<int>& perm, std::size_t src_off, std::size_t dst_off,
                   std::uint64_t seed) {
  const templates::permute::PermuteProblem p(dtype, shape, perm);
  const Family& fam = templates::permute::permute_family();
  const Workload w = fam.workload(p, seed);
  const auto expected = fam.reference(p, w)[0];
  const std::size_t es = dtype_size(dtype), bytes = static_cast<std::size_t>(p.elements()) * es;
  Buffer in(bytes), out(bytes);
  in.upload(w.inputs[0], src_off * es);
  out.poison();
  permute(rt, in.at(src_off * es), out.at(dst_off * es), shape, perm, dtype);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  const auto got = out.download(bytes, dst_off * es);
  INFO(dtype_name(dtype), " ", text(shape, perm), " offsets src ", src_off, " dst ", dst_off);
  if (got != expected) {
    std::size_t first = 0, bad = 0;
    for (std::size_t i = 0; i < bytes; ++i)
      if (got[i] != expected[i]) {
        if (bad++ == 0) first = i;
      }
    FAIL_CHECK(bad, " of ", bytes, " bytes differ; first in element ", first / es, " (got byte ",
               static_cast<int>(got[first]), ", expected ", static_cast<int>(expected[first]), ")");
  }
  for (std::byte b : out.download(dst_off * es, 0)) REQUIRE(b == std::byte{0xFF});
  const std::size_t end = dst_off * es + bytes;
  for (std::byte b : out.download(out.bytes - end, end)) REQUIRE(b == std::byte{0xFF});
}

// Every permutation of `shape`.
std::vector<std::vector<int>> all_perms(std::size_t n) {
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<std::vector<int>> out;
  do out.push_back(perm);
  while (std::next_permutation(perm.begin(), perm.end()));
  return out;
}

constexpr DType kSizes[] = {DType::kInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64};

TEST_CASE(
    "every permutation of odd 2-, 3-, 4- and 5-d shapes at every element size matches the CPU reference") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const std::vector<std::vector<std::int64_t>> shapes = {
      {2, 3}, {7, 9}, {31, 33}, {3, 7, 2}, {5, 6, 7, 8}, {6, 5, 3, 3, 4}, {2, 1, 5, 3, 1},
  };
  std::uint64_t seed = 1;
  for (DType dtype : kSizes)
    for (const auto& shape : shapes)
      for (const auto& perm : all_perms(shape.size())) {
        check_permute(rt, dtype, shape, perm, 0, 0, ++seed);
        if (shape.size() <= 4) {
          check_permute(rt, dtype, shape, perm, 1, 1, ++seed);  // both one element off: narrower movement
          check_permute(rt, dtype, shape, perm, 0, 3, ++seed);  // differently misaligned
        }
      }
}

TEST_CASE("every dtype, and shapes whose last dim stays with wide movements") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::uint64_t seed = 1000;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                      DType::kUInt8, DType::kInt16, DType::kInt32, DType::kInt64}) {
    check_permute(rt, dtype, {37, 61}, {1, 0}, 0, 0, ++seed);
    check_permute(rt, dtype, {4, 6, 5, 8}, {0, 2, 1, 3}, 0, 0, ++seed);
    check_permute(rt, dtype, {4, 6, 5, 8}, {0, 2, 1, 3}, 1, 1, ++seed);
    check_permute(rt, dtype, {64, 33, 16}, {1, 0, 2}, 0, 0, ++seed);  // last dim collapses to one wide unit
    check_permute(rt, dtype, {64, 33, 16}, {1, 0, 2}, 2, 2, ++seed);
    check_permute(rt, dtype, {3, 40, 56}, {0, 2, 1}, 0, 0, ++seed);
  }
}

TEST_CASE("the bench's 5-d shape and the large transposes' structure at every element size") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::uint64_t seed = 2000;
  for (DType dtype : kSizes) {
    check_permute(rt, dtype, {128, 128, 3, 3, 64}, {4, 3, 2, 1, 0}, 0, 0, ++seed);
    check_permute(rt, dtype, {128, 128, 3, 3, 64}, {2, 0, 4, 3, 1}, 0, 0, ++seed);
    check_permute(rt, dtype, {4, 64, 65, 127}, {0, 2, 3, 1}, 0, 0, ++seed);
    check_permute(rt, dtype, {4, 65, 127, 64}, {0, 3, 1, 2}, 0, 0, ++seed);
    check_permute(rt, dtype, {1000, 999}, {1, 0}, 0, 0, ++seed);
  }
}

TEST_CASE("every legal config verifies on odd shapes (tuner verification path)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const std::pair<const char*, std::vector<std::string>> problems[] = {
      {"int8", {"3x40x56", "021"}},         {"int8", {"5x37x41", "021"}},
      {"float16", {"40x72", "10"}},         {"float16", {"33x31", "10"}},
      {"float16", {"3x5x7x6", "2013"}},     {"float32", {"3x33x65", "021"}},
      {"float32", {"2x16x5x7", "0231"}},    {"float32", {"4x6x5x8", "0213"}},
      {"float64", {"6x5x3x3x4", "43210"}},  {"int8", {"8x16x16", "102"}},
      {"float32", {"17x24x4", "102"}},      {"float16", {"3x36x52", "021"}},
      {"bfloat16", {"6x4x3x3x8", "43210"}},
  };
  for (const auto& [dtype, sp] : problems) {
    auto problem = templates::permute::permute_family().make_problem({{"dtype", dtype}, {"shape", sp[0]}, {"perm", sp[1]}});
    tuner::TuneOptions opt;
    opt.min_time_ms = 0.02;
    opt.min_reps = 1;
    opt.max_reps = 3;
    opt.retime_top = 1;
    opt.retime_reps = 2;
    opt.store = false;
    tuner::TuneReport r = tuner::tune(rt, templates::permute::permute_family(), *problem, opt);
    INFO(problem->signature());
    CHECK(r.candidates.size() > 10);
    for (const auto& c : r.candidates) {
      INFO(c.config.text(), " ", c.reason);
      CHECK((c.status == "ok" || c.status == "cut"));
    }
  }
}

TEST_CASE("zero-size tensors launch nothing; identities are one copy; bad input is a clear error") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer a(4096), b(4096);
  b.poison();
  permute(rt, a.at(0), b.at(0), {3, 0, 5}, {2, 0, 1}, DType::kFloat32);
  permute(rt, nullptr, nullptr, {0}, {0}, DType::kFloat32);  // nothing to read or write
  JITUNE_CU_CHECK(cuCtxSynchronize());
  for (std::byte x : b.download(4096, 0)) CHECK(x == std::byte{0xFF});
  CHECK_THROWS_AS(permute(rt, a.at(0), b.at(0), {3, 0, 5}, {2, 2, 1}, DType::kFloat32), InvalidArgument);
  // Moving only size-1 dims is an identity: one device copy.
  check_permute(rt, DType::kFloat32, {3, 1, 5, 1}, {1, 0, 3, 2}, 0, 0, 5);
  check_permute(rt, DType::kFloat16, {1, 1}, {1, 0}, 0, 1, 6);
  check_permute(rt, DType::kFloat64, {}, {}, 0, 0, 7);

  CHECK_THROWS_WITH_AS(permute(rt, a.at(0), b.at(0), {4, 5}, {0, 0}, DType::kFloat32),
                       doctest::Contains("appears twice"), InvalidArgument);
  CHECK_THROWS_WITH_AS(permute(rt, a.at(0), b.at(0), {4, 5}, {1, 0, 2}, DType::kFloat32),
                       doctest::Contains("3 entries for 2 dims"), InvalidArgument);
  CHECK_THROWS_WITH_AS(permute(rt, a.at(0), b.at(0), {4, 5}, {1, 5}, DType::kFloat32),
                       doctest::Contains("permutation of 0..n-1"), InvalidArgument);
  CHECK_THROWS_WITH_AS(permute(rt, nullptr, b.at(0), {4, 5}, {1, 0}, DType::kFloat32),
                       doctest::Contains("null"), InvalidArgument);
  CHECK_THROWS_WITH_AS(permute(rt, a.at(2), b.at(0), {4, 5}, {1, 0}, DType::kFloat32),
                       doctest::Contains("not aligned"), InvalidArgument);
  CHECK_THROWS_WITH_AS(permute(rt, a.at(0), a.at(40), {4, 5}, {1, 0}, DType::kFloat32),
                       doctest::Contains("overlap"), InvalidArgument);
  CHECK_NOTHROW(
      permute(rt, a.at(0), a.at(80), {4, 5}, {1, 0}, DType::kFloat32));  // adjacent, not overlapping
  JITUNE_CU_CHECK(cuCtxSynchronize());
}

TEST_CASE("launches go on the caller's stream") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const std::vector<std::int64_t> shape = {64, 1000, 300};
  const std::vector<int> perm = {0, 2, 1};
  const templates::permute::PermuteProblem p(DType::kFloat32, shape, perm);
  const Workload w = templates::permute::permute_family().workload(p, 9);
  const auto expected = templates::permute::permute_family().reference(p, w)[0];
  Buffer in(w.inputs[0].size()), out(w.inputs[0].size());
  in.upload(w.inputs[0], 0);
  out.poison();
  driver::StreamHandle stream;
  permute(rt, in.at(0), out.at(0), shape, perm, DType::kFloat32, reinterpret_cast<Stream>(stream.get()));
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  CHECK(out.download(expected.size(), 0) == expected);
}

TEST_CASE("waves 0 launches one balanced wave: every block resident, the same number of tiles each") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = templates::permute::permute_family();
  const std::vector<std::int64_t> shape = {1000, 3000};
  const std::vector<int> perm = {1, 0};
  const templates::permute::PermuteProblem p(DType::kFloat32, shape, perm);
  for (std::int64_t block : {256, 1024}) {
    const Config config{{"kind", templates::permute::kTiled},     {"movement", 4},  {"vec", 1},   {"tile", 32},
                        {"rows", 32 * 32 / block}, {"block", block}, {"waves", 0}, {"group", 1},
                        {"batch_order", 0}};
    REQUIRE(fam.validate(p, config, rt.device()).empty());
    const Kernel& k = internal::impl(rt).kernel(fam, p, config);
    const std::uint64_t tiles = 32 * 94;  // ceil(1000 / 32) x ceil(3000 / 32)
    REQUIRE(k.shape.balance_units == tiles);
    int per_sm = 0;
    JITUNE_CU_CHECK(
        cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k.function, static_cast<int>(block), 0));
    const std::uint64_t resident = std::uint64_t(per_sm) * rt.device().sm_count;
    INFO("block ", block, ": ", per_sm, " resident per SM, grid ", k.shape.grid.x);
    CHECK(k.shape.grid.x <= resident);
    const std::uint64_t per_block = (tiles + k.shape.grid.x - 1) / k.shape.grid.x;
    CHECK(per_block == (tiles + resident - 1) / resident);
    CHECK((per_block - 1) * k.shape.grid.x < tiles);  // no block idle
  }
}

TEST_CASE(
    "a permute right behind the kernel that writes its input sees the finished input (programmatic launch) "
    "[sm_90]") {
  test::PdlCase pdl;
  Runtime& rt = pdl.rt;
  const CUstream s = pdl.s;
  struct Case {
    DType dtype;
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
  };
  // The tiled kernel, the 2-byte pair kernel and the general kernel (the heuristic picks of these shapes).
  for (const Case& c :
       {Case{DType::kInt32, {64, 96, 33}, {0, 2, 1}}, Case{DType::kFloat16, {40, 96, 34}, {0, 2, 1}},
        Case{DType::kInt32, {16, 24, 10, 9}, {2, 0, 1, 3}}}) {
    INFO(dtype_name(c.dtype), " ", text(c.shape, c.perm));
    const templates::permute::PermuteProblem p(c.dtype, c.shape, c.perm);
    const Family& fam = templates::permute::permute_family();
    const Workload stale = fam.workload(p, 41), fresh = fam.workload(p, 42);
    const auto expected = fam.reference(p, fresh)[0];
    const std::size_t bytes = fresh.inputs[0].size();
    REQUIRE(bytes % 4 == 0);
    Buffer in(bytes), out(bytes), next(bytes), saved(bytes);
    next.upload(fresh.inputs[0], 0);
    in.upload(stale.inputs[0], 0);
    permute(rt, in.at(0), out.at(0), c.shape, c.perm, c.dtype, reinterpret_cast<Stream>(s));  // compiled here
    JITUNE_CU_CHECK(cuStreamSynchronize(s));
    pdl.producer.expect_waits(s, next, in, stale.inputs[0], out, saved, expected, [&] {
      permute(rt, in.at(0), out.at(0), c.shape, c.perm, c.dtype, reinterpret_cast<Stream>(s));
    }, "the permute");
    CHECK_MESSAGE(pdl.producer.control_races(s, next, in, stale.inputs[0], out, saved),
                  "control: a dependent copy that does not wait should have read the stale input; if the driver "
                  "serialises programmatic launches here, this test cannot tell a missing wait");
  }
}

TEST_CASE("the tuned pick: a tuned record is used exactly by a new Runtime and is correct") {
  TempDir dir;
  const std::vector<std::int64_t> shape = {8, 96, 200};
  const std::vector<int> perm = {0, 2, 1};
  const std::string sig = permute_signature(shape, perm, DType::kFloat16);
  std::string tuned;
  {
    Runtime rt(test::isolated_options(dir));
    auto problem = templates::permute::permute_family().parse_problem(sig);
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kRandom;
    opt.budget = 16;
    opt.min_time_ms = 0.2;
    tuner::TuneReport r = tuner::tune(rt, templates::permute::permute_family(), *problem, opt);
    CHECK(r.stored);
    CHECK(r.best_us > 0);
    tuned = r.best.text();
  }
  Runtime rt(test::isolated_options(dir));
  const Explanation x = rt.explain("permute", sig);
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.config == tuned);
  check_permute(rt, DType::kFloat16, shape, perm, 0, 0, 77);
  check_permute(rt, DType::kFloat16, shape, perm, 1, 1, 78);  // the tuned config adapted to 2-byte alignment
  const Explanation near =
      rt.explain("permute", permute_signature(std::vector<std::int64_t>{8, 104, 200}, perm, DType::kFloat16));
  CHECK(near.level == MatchLevel::kNearestProblem);
}

// Byte i of the big tests' input: never 0xFF (the poison), never zero.
inline std::uint8_t pattern(std::uint64_t i) {
  std::uint64_t h = (i ^ (i >> 29)) * 0x9e3779b97f4a7c15ull;
  return static_cast<std::uint8_t>(1 + (h >> 56) % 254);
}

template <class F>
void in_parallel(std::uint64_t n, F&& body) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  const std::uint64_t chunk = (n + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&body, t, chunk, n] { body(std::min(n, chunk * t), std::min(n, chunk * (t + 1))); });
  for (auto& th : pool) th.join();
}

TEST_CASE("more than 2^31 elements take the 64-bit index path (about 3 GiB, tiled and general kernels)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const std::int64_t rows = 57349, cols = 57347;  // 3.29e9 one-byte elements, neither a tile multiple
  const auto bytes = static_cast<std::size_t>(rows * cols);
  std::size_t free_bytes = 0, total = 0;
  JITUNE_CU_CHECK(cuMemGetInfo(&free_bytes, &total));
  REQUIRE_MESSAGE(free_bytes > 2 * bytes + (std::size_t{1} << 30), "needs about 7 GiB of free device memory");
  std::vector<std::uint8_t> host(bytes);
  in_parallel(bytes, [&](std::uint64_t b, std::uint64_t e) {
    for (std::uint64_t i = b; i < e; ++i) host[i] = pattern(i);
  });
  Buffer in(bytes), out(bytes);
  JITUNE_CU_CHECK(cuMemcpyHtoD(in.mem.get(), host.data(), bytes));
  const Family& fam = templates::permute::permute_family();
  SUBCASE("tiled transpose") {
    const std::vector<std::int64_t> shape = {rows, cols};
    const std::vector<int> perm = {1, 0};
    const templates::permute::PermuteProblem p(DType::kInt8, shape, perm);
    CHECK(fam.source(p, fam.heuristic(p, rt.device())).name_expression.find("unsigned long long>") !=
          std::string::npos);
    out.poison();
    permute(rt, in.at(0), out.at(0), shape, perm, DType::kInt8);
    JITUNE_CU_CHECK(cuCtxSynchronize());
    JITUNE_CU_CHECK(cuMemcpyDtoH(host.data(), out.mem.get(), bytes));
    std::atomic<std::uint64_t> bad{0}, first{~0ull};
    in_parallel(static_cast<std::uint64_t>(cols), [&](std::uint64_t b, std::uint64_t e) {
      std::uint64_t local = 0;
      for (std::uint64_t c = b; c < e; ++c)
        for (std::uint64_t r = 0; r < static_cast<std::uint64_t>(rows); ++r)
          if (host[c * rows + r] != pattern(r * cols + c)) {
            if (local++ == 0) first = std::min<std::uint64_t>(first, c * rows + r);
          }
      bad += local;
    });
    CHECK_MESSAGE(bad == 0, bad.load(), " bytes wrong, first at output offset ", first.load());
  }
  SUBCASE("general kernel: the last dim (3 bytes) stays") {
    const std::int64_t a = 33000, b = 33000;
    const std::vector<std::int64_t> shape = {a, b, 3};
    const std::vector<int> perm = {1, 0, 2};
    const templates::permute::PermuteProblem p(DType::kInt8, shape, perm);
    CHECK(fam.source(p, fam.heuristic(p, rt.device())).name_expression.find("permute_general<1, 3,") !=
          std::string::npos);
    CHECK(fam.source(p, fam.heuristic(p, rt.device())).name_expression.find("unsigned long long>") !=
          std::string::npos);
    out.poison();
    permute(rt, in.at(0), out.at(0), shape, perm, DType::kInt8);
    JITUNE_CU_CHECK(cuCtxSynchronize());
    const auto n = static_cast<std::uint64_t>(a * b * 3);
    JITUNE_CU_CHECK(cuMemcpyDtoH(host.data(), out.mem.get(), n));
    std::atomic<std::uint64_t> bad{0};
    in_parallel(static_cast<std::uint64_t>(b), [&](std::uint64_t j0, std::uint64_t j1) {
      std::uint64_t local = 0;
      for (std::uint64_t j = j0; j < j1; ++j)
        for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(a); ++i)
          for (std::uint64_t k = 0; k < 3; ++k)
            local += host[(j * a + i) * 3 + k] != pattern((i * b + j) * 3 + k);
      bad += local;
    });
    CHECK_MESSAGE(bad == 0, bad.load(), " bytes wrong");
    std::uint8_t tail[64];
    JITUNE_CU_CHECK(cuMemcpyDtoH(tail, out.mem.get() + n, sizeof tail));
    for (std::uint8_t x : tail) CHECK(x == 0xFF);
  }
}

}  // namespace
}  // namespace jitune
