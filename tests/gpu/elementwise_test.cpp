// GPU tests of the elementwise family through the runtime API: every dtype against the CPU reference at odd sizes,
// offset pointers, poisoned outputs, the tuned pick, tuning on first use, and bad input.
#include <jitune/jitune.hpp>
#include <jitune/tuner.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "cache/store.hpp"
#include "gpu_util.hpp"
#include "runtime/runtime_impl.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using test::Buffer;
using test::TempDir;

// Runs `expr` through the runtime API on random inputs at element offset `offsets[i]` per pointer (output first),
// and compares every element with the CPU reference (the family's own reference and tolerance).
void check_expression(Runtime& rt, const std::string& expr, DType dtype, std::int64_t n,
                      std::vector<std::size_t> offsets, std::uint64_t seed) {
  const std::size_t es = dtype_size(dtype);
  auto problem = templates::elementwise::elementwise_family().make_problem(
      {{"expr", expr}, {"dtype", std::string(dtype_name(dtype))}, {"n", std::to_string(n)}});
  const auto& p = static_cast<const templates::elementwise::ElementwiseProblem&>(*problem);
  Workload w = templates::elementwise::elementwise_family().workload(p, seed);
  auto expected = templates::elementwise::elementwise_family().reference(p, w)[0];
  offsets.resize(p.arity() + 1, offsets.empty() ? 0 : offsets.back());
  Buffer out(static_cast<std::size_t>(n) * es);
  out.poison();
  std::vector<std::unique_ptr<Buffer>> ins;
  std::vector<const void*> in_ptrs;
  for (int a = 0; a < p.arity(); ++a) {
    ins.push_back(std::make_unique<Buffer>(static_cast<std::size_t>(n) * es));
    ins.back()->upload(w.inputs[a], offsets[a + 1] * es);
    in_ptrs.push_back(ins.back()->at(offsets[a + 1] * es));
  }
  elementwise(rt, expr, std::span<const void* const>(in_ptrs), out.at(offsets[0] * es), n, dtype);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  auto got = out.download(static_cast<std::size_t>(n) * es, offsets[0] * es);
  const OutputCheck check = templates::elementwise::elementwise_family().output_check(p, 0);
  const CompareResult r = compare_host(check, got.data(), expected.data(), static_cast<std::uint64_t>(n));
  INFO(expr, " ", dtype_name(dtype), " n=", n, " offsets out=", offsets[0], " in0=", offsets.size() > 1 ? offsets[1] : 0);
  CHECK_MESSAGE(r.ok(), r.describe(static_cast<std::uint64_t>(n), check));
  // Bytes around the output must stay poisoned: the kernel wrote nothing outside [0, n).
  auto before = out.download(offsets[0] * es, 0);
  for (std::byte b : before) REQUIRE(b == std::byte{0xFF});
  const std::size_t end = offsets[0] * es + static_cast<std::size_t>(n) * es;
  for (std::byte b : out.download(out.bytes - end, end)) REQUIRE(b == std::byte{0xFF});
}

TEST_CASE("elementwise matches the CPU reference for every dtype, size and alignment") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const std::int64_t sizes[] = {1, 7, 4097, (1 << 20) + 3, 1 << 24};
  std::uint64_t seed = 1;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (std::int64_t n : sizes) {
      check_expression(rt, "z = x * y", dtype, n, {0, 0, 0}, ++seed);
      check_expression(rt, "z = x * y", dtype, n, {1, 1, 1}, ++seed);      // every pointer one element off
      check_expression(rt, "z = x * y", dtype, n, {0, 1, 3}, ++seed);      // differently misaligned: realigned
      check_expression(rt, "y = x > 0 ? x : 0.1f * x", dtype, n, {0, 0}, ++seed);
      check_expression(rt, "out = a * b + c", dtype, n, {2, 2, 2, 2}, ++seed);
    }
  check_expression(rt, "y = tanhf(x) * expf(-x * x)", DType::kFloat32, 100003, {0, 0}, 99);
}

// Issue 19: every pack of every dtype, launched directly, with the output and two inputs at every element offset
// within a pack: one kernel realigns mixed offsets in registers. The bytes around each input are poison (NaN in every
// dtype), so a realignment that picks a neighbour's bytes, or reads past a buffer, shows in the result.
TEST_CASE("every pack realigns every offset combination of output and inputs (mixed alignment at full width)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Runtime::Impl& impl = internal::impl(rt);
  const Family& fam = templates::elementwise::elementwise_family();
  std::uint64_t seed = 700;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{13}, std::int64_t{4099}, std::int64_t{65543}}) {
      const std::size_t es = dtype_size(dtype);
      auto problem = fam.make_problem({{"expr", "z = x * y - x"}, {"dtype", std::string(dtype_name(dtype))},
                                       {"n", std::to_string(n)}});
      const auto& p = static_cast<const templates::elementwise::ElementwiseProblem&>(*problem);
      const Workload w = fam.workload(p, ++seed);
      const auto expected = fam.reference(p, w)[0];
      const OutputCheck check = fam.output_check(p, 0);
      Buffer x(static_cast<std::size_t>(n) * es), y(static_cast<std::size_t>(n) * es),
          out(static_cast<std::size_t>(n) * es);
      for (int pack : {2, 4, 8}) {
        if (static_cast<std::size_t>(pack) * es > 16) continue;
        const Config config{{"pack", pack}, {"block", 128}, {"unroll", 2}, {"waves", 1}};
        const Kernel& k = impl.kernel(fam, p, config);
        for (int o : {0, 1, pack - 1})
          for (int xo = 0; xo < pack; ++xo)
            for (int yo = 0; yo < pack; ++yo) {
              x.poison();
              y.poison();
              out.poison();
              x.upload(w.inputs[0], xo * es);
              y.upload(w.inputs[1], yo * es);
              const void* pointers[] = {x.at(xo * es), y.at(yo * es), out.at(o * es)};
              const std::uint8_t alignment[] = {alignment_class(pointers[0], 16), alignment_class(pointers[1], 16),
                                                alignment_class(pointers[2], 16)};
              KernelArgs args;
              fam.kernel_args(p, config, Bindings{pointers, alignment, nullptr, {}}, args);
              impl.launch(k, args, nullptr);
              JITUNE_CU_CHECK(cuCtxSynchronize());
              const auto got = out.download(static_cast<std::size_t>(n) * es, o * es);
              const CompareResult r = compare_host(check, got.data(), expected.data(), static_cast<std::uint64_t>(n));
              INFO(dtype_name(dtype), " n=", n, " pack=", pack, " offsets out=", o, " x=", xo, " y=", yo);
              REQUIRE_MESSAGE(r.ok(), r.describe(static_cast<std::uint64_t>(n), check));
              for (std::byte b : out.download(o * es, 0)) REQUIRE(b == std::byte{0xFF});
              const std::size_t end = o * es + static_cast<std::size_t>(n) * es;
              for (std::byte b : out.download(out.bytes - end, end)) REQUIRE(b == std::byte{0xFF});
            }
      }
    }
}

TEST_CASE("n = 0 launches nothing and still validates the call") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer out(64);
  out.poison();
  elementwise(rt, "z = x * y", {out.at(0), out.at(0)}, out.at(0), 0, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  for (std::byte b : out.download(64, 0)) CHECK(b == std::byte{0xFF});
  CHECK_THROWS_AS(elementwise(rt, "z = x * y", {out.at(0)}, out.at(0), 0, DType::kFloat32), InvalidArgument);
}

TEST_CASE("in-place elementwise (output aliases an input)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const std::int64_t n = 300001;
  auto x = test::random_values(DType::kFloat32, n, 5);
  Buffer buf(n * 4);
  buf.upload(x, 0);
  elementwise(rt, "x = x * 2 + 1", {buf.at(0)}, buf.at(0), n, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  auto got = buf.download(n * 4, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    float g, v;
    std::memcpy(&g, got.data() + i * 4, 4);
    std::memcpy(&v, x.data() + i * 4, 4);
    REQUIRE(g == v * 2 + 1);
  }
}

TEST_CASE("launches go on the caller's stream") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  driver::StreamHandle stream;
  const std::int64_t n = 1 << 20;
  auto x = test::random_values(DType::kFloat16, n, 8);
  Buffer in(n * 2), out(n * 2);
  in.upload(x, 0);
  out.poison();
  elementwise(rt, "y = x + x", {in.at(0)}, out.at(0), n, DType::kFloat16, reinterpret_cast<Stream>(stream.get()));
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  auto got = out.download(n * 2, 0);
  for (std::int64_t i = 0; i < n; i += 997)
    REQUIRE(load_element(DType::kFloat16, got.data(), i) == 2 * load_element(DType::kFloat16, x.data(), i));
}

TEST_CASE(
    "an elementwise call right behind the kernel that writes its input sees the finished input (programmatic "
    "launch) [sm_90]") {
  test::PdlCase pdl;
  Runtime& rt = pdl.rt;
  const CUstream s = pdl.s;
  // One element (a single block, the scalar path), an odd count (vector region and tail), a large one (many blocks).
  for (std::int64_t n : {1, 4099, 1 << 22}) {
    INFO("n=", n);
    const std::size_t bytes = static_cast<std::size_t>(n) * 4;
    const auto fresh = test::random_values(DType::kFloat32, n, 42), stale = test::random_values(DType::kFloat32, n, 41),
               y_values = test::random_values(DType::kFloat32, n, 43);
    Buffer x(bytes), y(bytes), out(bytes), next(bytes), saved(bytes);
    y.upload(y_values, 0);
    next.upload(fresh, 0);
    auto call = [&] {
      elementwise(rt, "z = x * y", {x.at(0), y.at(0)}, out.at(0), n, DType::kFloat32, reinterpret_cast<Stream>(s));
    };
    // The expected output: the same call on the finished input, nothing before it.
    x.upload(fresh, 0);
    call();
    JITUNE_CU_CHECK(cuStreamSynchronize(s));
    const auto expected = out.download(bytes, 0);
    REQUIRE(expected != stale);
    pdl.producer.expect_waits(s, next, x, stale, out, saved, expected, call, "the elementwise kernel");
    if (n == 4099)
      CHECK_MESSAGE(pdl.producer.control_races(s, next, x, stale, out, saved),
                    "control: a dependent copy that does not wait should have read the stale input");
  }
}

TEST_CASE("bad input is a clear error") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer b(1024);
  SUBCASE("wrong number of inputs names the inputs in order") {
    try {
      elementwise(rt, "z = y * x", {b.at(0)}, b.at(0), 16, DType::kFloat32);
      FAIL("no exception");
    } catch (const InvalidArgument& e) {
      CHECK(std::string(e.what()).find("y, x") != std::string::npos);
    }
  }
  SUBCASE("unknown function quotes NVRTC") {
    try {
      elementwise(rt, "z = nosuchfn(x)", {b.at(0)}, b.at(0), 16, DType::kFloat32);
      FAIL("no exception");
    } catch (const CompileError& e) {
      CHECK(std::string(e.what()).find("nosuchfn") != std::string::npos);
      CHECK(e.log().find("is undefined") != std::string::npos);
      CHECK(e.family() == "elementwise");
    }
  }
  SUBCASE("null and misaligned pointers") {
    CHECK_THROWS_AS(elementwise(rt, "z = x", {nullptr}, b.at(0), 16, DType::kFloat32), InvalidArgument);
    CHECK_THROWS_AS(elementwise(rt, "z = x", {b.at(1)}, b.at(0), 16, DType::kFloat32), InvalidArgument);
  }
  SUBCASE("a host pointer is refused before any launch") {
    std::vector<float> host(16);
    try {
      elementwise(rt, "z = x", {host.data()}, b.at(0), 16, DType::kFloat32);
      FAIL("no exception");
    } catch (const InvalidArgument& e) {
      CHECK(std::string(e.what()).find("not device memory") != std::string::npos);
      CHECK(std::string(e.what()).find("elementwise x (") != std::string::npos);  // the op and the buffer
    }
  }
  SUBCASE("a count beyond the allocation is refused") {
    try {
      elementwise(rt, "z = x", {b.at(0)}, b.at(0), 1 << 20, DType::kFloat32);
      FAIL("no exception");
    } catch (const InvalidArgument& e) {
      CHECK(std::string(e.what()).find("check the element count") != std::string::npos);
    }
  }
  SUBCASE("unsupported dtype") {
    CHECK_THROWS_AS(elementwise(rt, "z = x", {b.at(0)}, b.at(0), 16, DType::kInt32), InvalidArgument);
  }
}

TEST_CASE("NaN and infinities pass through as IEEE arithmetic says (not fixed up)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, inf, -inf, inf, 1.0f, 0.0f, -0.0f, 3.0f};
  const std::vector<float> y = {1.0f, 2.0f, 2.0f, 0.0f, nan, inf, 1.0f, -inf};
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const std::size_t es = dtype_size(dtype);
    std::vector<std::byte> hx(x.size() * es), hy(y.size() * es);
    for (std::size_t i = 0; i < x.size(); ++i) {
      store_element(dtype, hx.data(), i, x[i]);
      store_element(dtype, hy.data(), i, y[i]);
    }
    Buffer bx(hx.size()), by(hy.size()), bz(hx.size());
    bx.upload(hx, 0);
    by.upload(hy, 0);
    bz.poison();
    elementwise(rt, "z = x * y", {bx.at(0), by.at(0)}, bz.at(0), static_cast<std::int64_t>(x.size()), dtype);
    JITUNE_CU_CHECK(cuCtxSynchronize());
    auto got = bz.download(hx.size(), 0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double g = load_element(dtype, got.data(), i), want = static_cast<double>(x[i] * y[i]);
      INFO(dtype_name(dtype), " element ", i);
      if (std::isnan(want)) CHECK(std::isnan(g));
      else CHECK(g == want);
    }
    // -0.0 keeps its sign: 1 * -0 is -0.
    CHECK(std::signbit(load_element(dtype, got.data(), 6)));
  }
}

TEST_CASE("several threads share one Runtime") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      try {
        driver::make_current(internal::impl(rt).context);
        driver::StreamHandle stream;
        const std::int64_t n = 10000 + 977 * (t % 3);  // some threads share problems, some do not
        auto x = test::random_values(DType::kFloat32, n, 100 + t);
        Buffer in(n * 4), out(n * 4);
        in.upload(x, 0);
        for (int rep = 0; rep < 50; ++rep)
          elementwise(rt, "y = (x + 1) * 4", {in.at(0)}, out.at(0), n, DType::kFloat32,
                      reinterpret_cast<Stream>(stream.get()));
        JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
        auto got = out.download(n * 4, 0);
        for (std::int64_t i = 0; i < n; ++i)
          if (load_element(DType::kFloat32, got.data(), i) !=
              (static_cast<float>(load_element(DType::kFloat32, x.data(), i)) + 1.0f) * 4.0f)  // no FMA to contract
            ++failures;
      } catch (const std::exception& e) {
        MESSAGE(e.what());
        ++failures;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
}

TEST_CASE("the tuned pick: a tuned record is used exactly, by a new Runtime, without NVRTC") {
  TempDir dir;
  const std::int64_t n = (1 << 20) + 3;
  const std::string sig = elementwise_signature("z = x * y", n, DType::kFloat32);
  std::string tuned;
  {
    Runtime rt(test::isolated_options(dir));
    auto problem = templates::elementwise::elementwise_family().parse_problem(sig);
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kRandom;
    opt.budget = 12;
    opt.min_time_ms = 0.2;
    tuner::TuneReport r = tuner::tune(rt, templates::elementwise::elementwise_family(), *problem, opt);
    CHECK(r.stored);
    CHECK(r.best_us > 0);
    CHECK(r.default_us > 0);
    tuned = r.best.text();
    std::size_t ok = 0;
    for (const auto& c : r.candidates) ok += c.status == "ok" || c.status == "cut";
    CHECK(ok >= 2);
  }
  Runtime rt(test::isolated_options(dir));
  Explanation x = rt.explain("elementwise", sig);
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.config == tuned);
  check_expression(rt, "z = x * y", DType::kFloat32, n, {0, 0, 0}, 77);
  CHECK(internal::impl(rt).compiler.compile_count() == 0);  // the winner's binary came from the disk cache
  // A different size of the same group borrows the nearest tuned config.
  Explanation near = rt.explain("elementwise", elementwise_signature("z = x * y", n + 1000, DType::kFloat32));
  CHECK(near.level == MatchLevel::kNearestProblem);
  CHECK(near.config == tuned);
  Explanation other = rt.explain("elementwise", elementwise_signature("z = x * y", n, DType::kFloat16));
  CHECK(other.level == MatchLevel::kHeuristic);
}

TEST_CASE("the heuristic default is timed in full even when kernels from a compile memo come first") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  auto memo = std::make_shared<tuner::CompileMemo>();
  tuner::TuneOptions opt;
  opt.strategy = tuner::Strategy::kRandom;
  opt.budget = 24;
  opt.seed = 7;
  opt.min_time_ms = 0.2;
  opt.cut_ratio = 1.0001;  // anything slower than the best so far is cut: only the default must escape that
  opt.compile_memo = memo;
  opt.store = false;
  // The first problem fills the memo; the second, the same kernels at another size, gets them all from it, in the
  // memo's order rather than the default first.
  for (std::int64_t n : {std::int64_t{(1 << 20) + 3}, std::int64_t{(1 << 19) + 5}}) {
    auto problem = templates::elementwise::elementwise_family().parse_problem(elementwise_signature("z = x * y", n, DType::kFloat32));
    tuner::TuneReport r = tuner::tune(rt, templates::elementwise::elementwise_family(), *problem, opt);
    INFO("n = ", n, ", reused ", r.compile_reused);
    CHECK(r.default_us > 0);
    bool found = false;
    for (const auto& c : r.candidates)
      if (c.config == r.heuristic) {
        found = true;
        CHECK(c.status == "ok");
      }
    CHECK(found);
  }
}

TEST_CASE("guided tuning: a config tuned on another GPU is in round 0, the budget holds, the winner verifies") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Runtime::Impl& impl = internal::impl(rt);
  REQUIRE(impl.user_store);
  const Family& fam = templates::elementwise::elementwise_family();
  auto problem = fam.parse_problem(elementwise_signature("z = x * y", 1 << 20, DType::kFloat32));
  std::size_t pruned = 0;
  const std::vector<Config> legal = tuner::legal_candidates(fam, *problem, impl.device, pruned);
  const Config heuristic = fam.heuristic(*problem, impl.device);
  REQUIRE(legal.size() > 10);
  REQUIRE(legal.front() == heuristic);
  // The same problem tuned on another model of this compute capability, with a config far from the default (the last
  // legal one in enumeration order).
  const Config transferred = legal.back();
  cache::Record rec;
  rec.key = impl.record_key(fam, *problem, transferred);
  rec.key.device_name = "Other GPU";
  rec.group = problem->group();
  rec.features = problem->features();
  rec.config = transferred.text();
  rec.time_us = 10;
  rec.reps = 10;
  rec.default_time_us = 12;
  rec.default_config = heuristic.text();
  rec.jitune_version = "test";
  rec.created_at = cache::utc_now();
  impl.user_store->put(rec);

  tuner::TuneOptions opt;
  opt.strategy = tuner::Strategy::kGuided;
  opt.budget = 10;
  opt.min_time_ms = 0.2;
  opt.store = false;
  const tuner::TuneReport r = tuner::tune(rt, fam, *problem, opt);
  CHECK(r.strategy == tuner::Strategy::kGuided);
  CHECK(r.legal == legal.size());
  CHECK(r.budget == 10);
  CHECK(r.candidates.size() <= 10);
  CHECK(r.seeds.other_devices == 1);
  CHECK(r.seeds.this_problem + r.seeds.nearby_shapes == 0);
  REQUIRE(!r.round_sizes.empty());
  std::size_t total = 0;
  for (std::size_t n : r.round_sizes) total += n;
  CHECK(total == r.candidates.size());
  CHECK(!r.stopped.empty());
  // Round 0: the default, then the transferred config.
  REQUIRE(r.round_sizes[0] == 2);
  CHECK(r.candidates[0].config == heuristic);
  CHECK(r.candidates[1].config == transferred);
  std::set<std::string> tried;
  for (const auto& c : r.candidates) CHECK_MESSAGE(tried.insert(c.config.text()).second, c.config.text(), " twice");
  // A verified winner, re-timed beside the default.
  CHECK(r.best_us > 0);
  CHECK(r.default_us > 0);
  bool winner_ok = false;
  for (const auto& c : r.candidates) winner_ok = winner_ok || (c.config == r.best && c.status == "ok");
  CHECK(winner_ok);

  // A time limit already spent: round 0 runs, no round after it.
  opt.time_budget_s = 1e-6;
  const tuner::TuneReport quick = tuner::tune(rt, fam, *problem, opt);
  CHECK(quick.stopped == "time");
  CHECK(quick.round_sizes == std::vector<std::size_t>{2});
  CHECK(quick.candidates.size() == 2);
  CHECK(quick.best_us > 0);
  // The other strategies time their whole list: a time limit there is a misuse.
  opt.strategy = tuner::Strategy::kRandom;
  CHECK_THROWS_AS(tuner::tune(rt, fam, *problem, opt), InvalidArgument);
}

TEST_CASE("tuning on first use stores a record and the call is correct") {
  TempDir dir;
  RuntimeOptions o = test::isolated_options(dir);
  o.tuning = tuner::tune_on_first_use({8, 0.2});
  Runtime rt(o);
  check_expression(rt, "out = a * b + c", DType::kBFloat16, 65537, {0, 0, 0, 0}, 3);
  Explanation x = rt.explain("elementwise", elementwise_signature("out = a * b + c", 65537, DType::kBFloat16));
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.time_us > 0);
  // The record carries the tuning GPU's fingerprint and where it was tuned (issue 17).
  const auto records = internal::impl(rt).user_store->records();
  REQUIRE_FALSE(records.empty());
  for (const auto& r : records) {
    CHECK(r.memory_mb == static_cast<int>(rt.device().global_memory_bytes >> 20));
    CHECK(r.sm_clock_mhz == rt.device().sm_clock_mhz);
    CHECK(r.sm_clock_mhz > 0);
    CHECK_FALSE(r.host.empty());
    CHECK(r.shard.empty());  // not a sharded run
  }
}

TEST_CASE("a misaligned call is decided for its alignment class; the tuner tunes that class on misaligned buffers") {
  TempDir dir;
  RuntimeOptions o = test::isolated_options(dir);
  o.tuning = tuner::tune_on_first_use({6, 0.2});
  Runtime rt(o);
  const std::int64_t n = 70001;
  const std::string plain = elementwise_signature("z = x * y", n, DType::kFloat16);
  const std::string x_off = "align=2,16,16;" + plain;   // x one element off
  const std::string all_off = "align=4,4,4;" + plain;  // every pointer two elements off
  auto stored = [&] { return test::stored_signatures(dir, "elementwise"); };
  // The aligned call tunes (and stores) the plain problem only.
  check_expression(rt, "z = x * y", DType::kFloat16, n, {0, 0, 0}, 11);
  CHECK(stored() == std::set<std::string>{plain});
  // x one element off: its class is tuned on its own and stored under its signature; the result is right.
  check_expression(rt, "z = x * y", DType::kFloat16, n, {0, 1, 0}, 12);
  CHECK(stored() == std::set<std::string>{plain, x_off});
  // Three elements off is the same class (2 bytes): nothing new is tuned. Two off everywhere is a new class.
  check_expression(rt, "z = x * y", DType::kFloat16, n, {0, 3, 0}, 13);
  CHECK(stored() == std::set<std::string>{plain, x_off});
  check_expression(rt, "z = x * y", DType::kFloat16, n, {2, 2, 2}, 14);
  CHECK(stored() == std::set<std::string>{plain, x_off, all_off});
  // A new Runtime without tuning serves each class from its own record.
  Runtime plain_rt(test::isolated_options(dir));
  CHECK(plain_rt.explain("elementwise", x_off).level == MatchLevel::kExact);
  CHECK(plain_rt.explain("elementwise", all_off).level == MatchLevel::kExact);
  check_expression(plain_rt, "z = x * y", DType::kFloat16, n, {0, 1, 0}, 15);
}

TEST_CASE("the tuner's workload places each buffer at the alignment class the problem names") {
  const auto p = templates::elementwise::elementwise_family().parse_problem(
      "align=2,8,4;dtype=float16;expr=z = x * y;n=1001");
  const Workload w = templates::elementwise::elementwise_family().workload(*p, 5);
  const auto reference = templates::elementwise::elementwise_family().reference(*p, w);
  TempDir dir;
  Runtime rt(test::isolated_options(dir));  // a context for the allocations
  tuner::DeviceWorkload dw(templates::elementwise::elementwise_family(), *p, w, reference);
  const Bindings b = dw.bindings({});
  REQUIRE(b.pointers.size() == 3);
  CHECK(b.alignment[0] == 2);
  CHECK(b.alignment[1] == 8);
  CHECK(b.alignment[2] == 4);
  CHECK(reinterpret_cast<std::uintptr_t>(b.pointers[0]) % 16 == 2);
  // The inputs' bytes sit behind the placed pointers.
  std::vector<std::byte> x(w.inputs[0].size());
  JITUNE_CU_CHECK(cuMemcpyDtoH(x.data(), reinterpret_cast<CUdeviceptr>(b.pointers[0]), x.size()));
  CHECK(x == w.inputs[0]);
}

TEST_CASE("every config of the space verifies on odd sizes (tuner verification path)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    auto problem = templates::elementwise::elementwise_family().make_problem(
        {{"expr", "z = x * y - x"}, {"dtype", std::string(dtype_name(dtype))}, {"n", "100003"}});
    tuner::TuneOptions opt;
    opt.min_time_ms = 0.05;
    opt.min_reps = 3;
    opt.store = false;
    opt.cut_ratio = 1e9;  // time every candidate: none may be cut, all must verify
    tuner::TuneReport r = tuner::tune(rt, templates::elementwise::elementwise_family(), *problem, opt);
    for (const auto& c : r.candidates) {
      INFO(c.config.text(), " ", c.reason);
      CHECK((c.status == "ok" || c.status == "resources_exceeded"));
    }
  }
}

TEST_CASE("a new Runtime's first call on a shipped case loads the shipped kernel, without NVRTC (issue 19)") {
  // The build's shipped cache and the kernels `jitune warmup --suite default --all-devices` compiled beside it; the
  // user's binary folder empty.
  TempDir dir;
  RuntimeOptions o = test::isolated_options(dir);
  o.use_builtin_shipped_caches = true;
  Runtime rt(o);
  const std::string sig = elementwise_signature("z = x * y", 1048576, DType::kFloat32);  // mul_float32_1048576
  if (rt.explain("elementwise", sig).level != MatchLevel::kExact) {
    MESSAGE("no shipped record for this device (" << rt.device().name << "): the shipped kernels are the H100's");
    return;
  }
  if (internal::impl(rt).shipped_binaries.empty()) {
    MESSAGE("built with -DJITUNE_SHIP_KERNELS=OFF: no shipped kernels");
    return;
  }
  check_expression(rt, "z = x * y", DType::kFloat32, 1048576, {0, 0, 0}, 501);
  CHECK(internal::impl(rt).compiler.compile_count() == 0);
  const std::filesystem::path user_kernels = dir.path / "kernels";
  const bool nothing_copied = !std::filesystem::exists(user_kernels) || std::filesystem::is_empty(user_kernels);
  CHECK(nothing_copied);  // served from the shipped folder, not copied into the user's
}

TEST_CASE("a shipped kernel the driver refuses (another architecture's image) is compiled again, never run") {
  // A shipped folder of our own: an empty shipped cache (the heuristic decides) and, under the key of the decided
  // kernel, a well-formed file whose image is an sm_80 build of it, which an sm_90 device cannot load.
  TempDir dir;
  const std::filesystem::path shipped = dir.path / "shipped";
  std::filesystem::create_directories(shipped);
  { cache::Store create(shipped / "empty.sqlite", cache::OpenMode::kReadWrite); }
  RuntimeOptions o = test::isolated_options(dir);
  o.shipped_caches = {shipped / "empty.sqlite"};
  const std::int64_t n = 100003;
  const std::string sig = elementwise_signature("z = x * y", n, DType::kFloat32);
  std::string key;
  {
    Runtime probe(o);
    if (probe.device().arch() == "sm_80") {
      MESSAGE("an sm_80 device loads the planted image: this case needs another architecture");
      return;
    }
    const Family& f = templates::elementwise::elementwise_family();
    const KernelSource src = f.source(*f.parse_problem(sig), Config::parse(probe.explain("elementwise", sig).config));
    Compiler compiler;
    key = compiler.binary_key(src.program, src.name_expression, probe.device().arch());
    CompiledProgram foreign = compiler.compile(src.program, {src.name_expression}, "sm_80", false);
    REQUIRE(foreign.ok);
    BinaryCache(shipped / "kernels").put(key, CachedBinary{foreign.cubin, foreign.lowered.at(0)});
  }
  Runtime rt(o);
  REQUIRE(internal::impl(rt).shipped_binaries.size() == 1);
  check_expression(rt, "z = x * y", DType::kFloat32, n, {0, 0, 0}, 502);  // correct: compiled for this device
  CHECK(internal::impl(rt).compiler.compile_count() == 1);
}

}  // namespace
}  // namespace jitune
