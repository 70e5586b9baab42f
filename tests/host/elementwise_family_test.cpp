// The elementwise family without a GPU: space and constraints, heuristic, alignment rule, index width, sources,
// workload and CPU reference, and an NVRTC compile of every legal config for sm_80 and sm_90.
#include <doctest/doctest.h>

#include <chrono>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/compiler.hpp"
#include "templates/elementwise/elementwise.hpp"
#include "templates/host_float.hpp"
#include "templates/sources.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

std::unique_ptr<Problem> problem(const std::string& expr, const std::string& dtype, std::int64_t n) {
  return templates::elementwise::elementwise_family().make_problem({{"expr", expr}, {"dtype", dtype}, {"n", std::to_string(n)}});
}

const Family& fam() { return templates::elementwise::elementwise_family(); }

}  // namespace

TEST_CASE("elementwise is registered and its template is embedded") {
  CHECK(&family("elementwise") == &fam());
  CHECK(template_source("elementwise/elementwise.cuh").find("__global__") != std::string::npos);
  CHECK(template_hash("elementwise/elementwise.cuh").size() == 16);
  CHECK_THROWS_WITH_AS(family("nope"), doctest::Contains("elementwise"), InvalidArgument);
}

TEST_CASE("signature is canonical and parses back to the same problem") {
  auto p = problem("z=x*y", "half", 1000);
  CHECK(p->signature() == "dtype=float16;expr=z = x * y;n=1000");
  CHECK(fam().parse_problem(p->signature())->signature() == p->signature());
  CHECK(p->group() == "float16|arity=2");
  CHECK(p->bytes_moved() == 1000 * 2 * 3);
  CHECK_THROWS_AS(problem("z = x", "int32", 10), InvalidArgument);
  CHECK_THROWS_AS(problem("z = x", "float32", -1), InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"expr", "z = x"}, {"dtype", "float32"}}), InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"expr", "z = x"}, {"dtype", "float32"}, {"n", "12abc"}}), InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"expr", "z = x"}, {"dtype", "float32"}, {"n", "1"}, {"m", "2"}}),
                  InvalidArgument);
}

TEST_CASE("launches are programmatic on sm_90 and later only (the kernel waits before touching memory)") {
  auto p = problem("z = x * y", "float16", 4099);
  for (int cc : {80, 86, 89, 90}) {
    const DeviceInfo dev = nominal_device(cc);
    for (const Config& c : {fam().heuristic(*p, dev), Config{{"pack", 1}, {"block", 128}, {"unroll", 8}, {"waves", 256}}})
      CHECK_MESSAGE(fam().launch_shape(*p, c, dev).programmatic == (cc >= 90), "cc ", cc, " ", c.text());
  }
  CHECK(template_source("elementwise/elementwise.cuh").find("wait_for_previous_kernel();") != std::string::npos);
}

TEST_CASE("constraints prune packs wider than 16 bytes, and the heuristic is legal") {
  const DeviceInfo dev = nominal_device(90);
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    auto p = problem("z = x * y", dtype, 1 << 20);
    CHECK(fam().validate(*p, fam().heuristic(*p, dev), dev).empty());
    std::size_t pruned = 0;
    auto legal = tuner::legal_candidates(fam(), *p, dev, pruned);
    CHECK(legal.front() == fam().heuristic(*p, dev));
    CHECK(legal.size() + pruned == fam().space().size());
    for (const Config& c : legal) CHECK(c.at("pack") * static_cast<std::int64_t>(dtype_size(parse_dtype(dtype))) <= 16);
  }
  auto p = problem("z = x * y", "float32", 10);
  const Config wide{{"pack", 8}, {"block", 256}, {"unroll", 1}, {"waves", 1}};
  CHECK(fam().check(*p, wide, dev).find("16 bytes") != std::string::npos);
  DeviceInfo small = dev;
  small.max_threads_per_block = 512;
  const Config big_block{{"pack", 4}, {"block", 1024}, {"unroll", 1}, {"waves", 1}};
  CHECK(fam().check(*p, big_block, small).find("exceeds") != std::string::npos);
}

TEST_CASE("launch grid: waves cap the grid-stride grid; 256 waves is one tile per block on large problems") {
  const DeviceInfo dev = nominal_device(90);
  auto p = problem("z = x * y", "float32", std::int64_t{1} << 27);  // 2^25 packs of 4
  const auto grid = [&](std::int64_t block, std::int64_t unroll, std::int64_t waves) {
    return fam().launch_shape(*p, Config{{"pack", 4}, {"block", block}, {"unroll", unroll}, {"waves", waves}}, dev)
        .grid.x;
  };
  const std::int64_t resident128 = dev.sm_count * (dev.max_threads_per_sm / 128);
  CHECK(grid(128, 1, 32) == resident128 * 32);                 // capped: each thread loops over several tiles
  CHECK(grid(128, 1, 256) == (std::int64_t{1} << 25) / 128);   // every tile its own block (Triton's launch)
  CHECK(grid(1024, 4, 256) == (std::int64_t{1} << 25) / 4096);
  auto tiny = problem("z = x * y", "float32", 5);
  CHECK(fam().launch_shape(*tiny, Config{{"pack", 4}, {"block", 128}, {"unroll", 1}, {"waves", 256}}, dev).grid.x == 1);
}

TEST_CASE("vector plan: aligned output packs, shifted inputs realigned, nothing read outside a buffer") {
  alignas(64) static char mem[512];
  using templates::elementwise::plan_vectors;
  auto at = [](int off) -> const void* { return mem + off; };
  SUBCASE("all aligned") {
    const void* in[] = {at(16), at(32)};
    auto v = plan_vectors(in, at(0), 4, 4, 1000);
    CHECK(v.head == 0);
    CHECK(v.packs == 250);
    CHECK(v.shifts == 0);
  }
  SUBCASE("all one float off: head of 3 elements, no shifts") {
    const void* in[] = {at(20), at(36)};
    auto v = plan_vectors(in, at(4), 4, 4, 1000);
    CHECK(v.head == 3);
    CHECK(v.packs == 249);  // 997 elements after the head: 249 packs and a tail of 1
    CHECK(v.shifts == 0);
  }
  SUBCASE("one input a float off: shifted by 1, the region starts a pack later and ends a pack early") {
    const void* in[] = {at(4), at(32)};
    auto v = plan_vectors(in, at(0), 4, 4, 1000);
    CHECK(v.head == 4);
    CHECK(v.shift(0) == 1);
    CHECK(v.shift(1) == 0);
    // Pair of the last pack: x + head - 1 + (packs + 1) * 4 elements <= x + 1000.
    CHECK(v.packs == 248);
    CHECK(4 - 1 + (v.packs + 1) * 4 <= 1000);
    CHECK(4 - 1 + (v.packs + 2) * 4 > 1000);
  }
  SUBCASE("f16 with eight-element packs: two inputs shifted by 3 and 5 halves") {
    const void* in[] = {at(12), at(16)};  // out at byte 6 needs a head of 5 halves; then in0 sits at byte 22, in1 at 26
    auto v = plan_vectors(in, at(6), 2, 8, 4099);
    CHECK(v.head == 5 + 8);
    CHECK(v.shift(0) == 3);
    CHECK(v.shift(1) == 5);
    CHECK(v.packs == 510);
  }
  SUBCASE("every offset combination: aligned accesses that stay inside each buffer, every element covered once") {
    for (std::size_t es : {std::size_t{2}, std::size_t{4}})
      for (int pack : {2, 4, 8}) {
        if (pack * es > 16) continue;
        const auto bytes = static_cast<std::uintptr_t>(pack) * es;
        for (std::int64_t n : {0, 1, 7, 8, 9, 31, 64, 65, 130})
          for (int o = 0; o < 8; ++o)
            for (int x = 0; x < 8; ++x)
              for (int y = 0; y < 8; ++y) {
                const void* in[] = {at(64 + x * static_cast<int>(es)), at(192 + y * static_cast<int>(es))};
                const void* out = at(320 + o * static_cast<int>(es));
                auto v = plan_vectors(in, out, es, pack, n);
                INFO("es=", es, " pack=", pack, " n=", n, " offsets ", o, " ", x, " ", y);
                REQUIRE(v.head >= 0);
                REQUIRE(v.packs >= 0);
                REQUIRE(v.head + v.packs * pack <= n);
                if (v.packs == 0) continue;
                CHECK((reinterpret_cast<std::uintptr_t>(out) + v.head * es) % bytes == 0);
                for (std::size_t a = 0; a < 2; ++a) {
                  const std::int64_t first = v.head - v.shift(a);  // element index of the first aligned read
                  CHECK((reinterpret_cast<std::uintptr_t>(in[a]) + first * es) % bytes == 0);
                  CHECK(first >= 0);
                  const std::int64_t last = first + (v.packs + (v.shift(a) != 0 ? 1 : 0)) * pack;  // one past
                  CHECK(last <= n);
                }
                // Enough of the problem runs vectorised: at most two packs and the alignment slack are scalar.
                CHECK(n - v.packs * pack <= 3 * pack + pack);
              }
      }
  }
  SUBCASE("a pointer off the element size leaves everything scalar") {
    const void* in[] = {at(1)};
    auto v = plan_vectors(in, at(0), 4, 4, 1000);
    CHECK(v.packs == 0);
    CHECK(v.head == 1000);
  }
  SUBCASE("head never exceeds n; a short problem has no packs and no shifts") {
    const void* in[] = {at(2)};
    auto v = plan_vectors(in, at(2), 2, 8, 3);
    CHECK(v.head == 3);
    CHECK(v.packs == 0);
    const void* mixed[] = {at(0)};
    auto m = plan_vectors(mixed, at(2), 2, 8, 10);
    CHECK(m.packs == 0);
    CHECK(m.shifts == 0);
  }
  SUBCASE("pack 1 is all vector") {
    const void* in[] = {at(2)};
    auto v = plan_vectors(in, at(6), 2, 1, 77);
    CHECK(v.head == 0);
    CHECK(v.packs == 77);
  }
}

TEST_CASE("a misaligned class is a problem of its own: signature, parsing, buffers' placement, features") {
  const auto p = fam().parse_problem("align=2,16,16;dtype=float16;expr=z = x * y;n=1000");
  CHECK(p->signature() == "align=2,16,16;dtype=float16;expr=z = x * y;n=1000");
  CHECK(p->group() == "float16|arity=2");  // tuned classes borrow from each other and from the aligned problem
  const auto specs = fam().buffers(*p);
  REQUIRE(specs.size() == 3);
  CHECK(specs[0].placement == 2);
  CHECK(specs[1].placement == 16);
  CHECK(specs[2].placement == 16);
  const auto aligned = problem("z = x * y", "float16", 1000);
  CHECK(aligned->features()[0] == doctest::Approx(p->features()[0]));
  CHECK(aligned->features()[1] == doctest::Approx(4.0));
  CHECK(p->features()[1] == doctest::Approx(1.0));
  // All sixteen is the plain problem: one canonical signature, so "align=16,16,16" never reaches a store.
  CHECK(fam().make_problem({{"expr", "z = x * y"}, {"dtype", "float16"}, {"n", "1000"}, {"align", "16,16,16"}})
            ->signature() == aligned->signature());
  CHECK_THROWS_WITH_AS(fam().parse_problem("align=2,16;dtype=float16;expr=z = x * y;n=1000"),
                       doctest::Contains("one per input"), InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().parse_problem("align=2,16,16;dtype=float32;expr=z = x * y;n=1000"),
                       doctest::Contains("from 4 (one float32 element)"), InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().parse_problem("align=3,16,16;dtype=float16;expr=z = x * y;n=1000"),
                       doctest::Contains("power of two"), InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().parse_problem("align=2,,16;dtype=float16;expr=z = x * y;n=1000"),
                       doctest::Contains("comma-separated"), InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().parse_problem("align=2,16,32;dtype=float16;expr=z = x * y;n=1000"),
                       doctest::Contains("comma-separated"), InvalidArgument);
}

TEST_CASE("with_alignment: the call's classes refine the problem unless every pointer is 16-byte aligned") {
  const auto p = problem("out = a * b + c", "float32", 4099);
  const std::uint8_t full[] = {16, 16, 16, 16};
  CHECK(fam().with_alignment(*p, full) == nullptr);
  const std::uint8_t mixed[] = {4, 16, 8, 16};
  const auto refined = fam().with_alignment(*p, mixed);
  REQUIRE(refined != nullptr);
  CHECK(refined->signature() == "align=4,16,8,16;dtype=float32;expr=out = a * b + c;n=4099");
  const std::uint8_t wrong_count[] = {4, 16};
  CHECK(fam().with_alignment(*p, wrong_count) == nullptr);
  // The refined problem keeps the plain one's kernels: the same instantiation whatever the class.
  const Config c = fam().heuristic(*p, nominal_device(90));
  CHECK(fam().source(*refined, c).name_expression == fam().source(*p, c).name_expression);
}

TEST_CASE("index width switches to 64 bits for large counts") {
  CHECK_FALSE(templates::elementwise::needs_index64(1 << 27));
  CHECK(templates::elementwise::needs_index64(std::int64_t{1} << 31));
  auto big = problem("z = x * y", "float32", std::int64_t{3} << 30);
  CHECK(fam().source(*big, fam().heuristic(*big, nominal_device(90))).name_expression.find("long long") !=
        std::string::npos);
}

TEST_CASE("workload is random and never zero; reference follows the expression") {
  auto p = problem("y = x > 0 ? x : 0.1f * x", "float32", 5000);
  Workload w = fam().workload(*p, 42);
  REQUIRE(w.inputs.size() == 1);
  auto ref = fam().reference(*p, w)[0];
  std::set<float> distinct;
  bool saw_negative = false;
  for (int i = 0; i < 5000; ++i) {
    const double x = load_element(DType::kFloat32, w.inputs[0].data(), i);
    CHECK(x != 0.0);
    saw_negative |= x < 0;
    distinct.insert(static_cast<float>(x));
    CHECK(load_element(DType::kFloat32, ref.data(), i) == static_cast<float>(x > 0 ? x : 0.1f * x));
  }
  CHECK(saw_negative);
  CHECK(distinct.size() > 4000);
  Workload w2 = fam().workload(*p, 43);
  CHECK(w2.inputs[0] != w.inputs[0]);
}

TEST_CASE("generated source declares inputs in order and the output once") {
  auto p = problem("x = x * y", "float32", 10);
  KernelSource s = fam().source(*p, fam().heuristic(*p, nominal_device(90)));
  CHECK(s.program.find("float x = jitune_v[0];") != std::string::npos);
  CHECK(s.program.find("float y = jitune_v[1];") != std::string::npos);
  CHECK(s.program.find("float x;") == std::string::npos);
  CHECK(s.name_expression.find("jitune::ew::elementwise<jitune_ew_op, float, 2, 4, 256, 1, int>") == 0);
}

TEST_CASE("NVRTC compiles every legal config for sm_80 and sm_90, every dtype") {
  Compiler compiler;
  for (int cc : {80, 90})
    for (const char* dtype : {"float32", "float16", "bfloat16"}) {
      auto p = problem("out = a * b + c", dtype, (1 << 20) + 3);
      auto r = tuner::dry_run(compiler, fam(), *p, nominal_device(cc), 0);
      INFO("sm_", cc, " ", dtype);
      REQUIRE(!r.candidates.empty());
      for (const auto& c : r.candidates) {
        INFO(c.config.text(), "\n", c.reason);
        CHECK(c.status == "ok");
        CHECK(c.resources.registers > 0);
      }
    }
}

TEST_CASE("a compile memo lets a later problem reuse the kernels an earlier one compiled") {
  Compiler compiler;
  const DeviceInfo dev = nominal_device(90);
  auto small = problem("z = x * y", "float32", 1000), large = problem("z = x * y", "float32", 777777);
  auto other = problem("z = x - y", "float32", 1000);
  std::size_t pruned = 0;
  std::vector<Config> configs = tuner::legal_candidates(fam(), *small, dev, pruned);
  configs.resize(9);  // the default and 8 more: a few batches
  // lowered name of each config's kernel, from one pool
  auto run = [&](tuner::CompilePool& pool) {
    std::map<std::string, std::string> lowered;
    while (auto batch = pool.next())
      for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
        REQUIRE(batch->output->ok);
        CHECK(batch->output->resources.at(batch->unit[b]).registers > 0);
        lowered[configs[batch->candidates[b]].text()] = batch->output->lowered.at(batch->unit[b]);
      }
    return lowered;
  };
  tuner::CompileMemo memo;
  const std::size_t before = compiler.compile_count();
  tuner::CompilePool first(compiler, fam(), *small, configs, dev.arch(), 2, true, &memo);
  const auto a = run(first);
  CHECK(first.reused() == 0);
  CHECK(a.size() == configs.size());
  const std::size_t compiled = compiler.compile_count() - before;
  CHECK(memo.units() > 0);

  // Same expression and dtype, another size: every candidate comes from the memo, no NVRTC call.
  tuner::CompilePool second(compiler, fam(), *large, configs, dev.arch(), 2, true, &memo);
  const auto b = run(second);
  CHECK(second.reused() == configs.size());
  CHECK(compiler.compile_count() - before == compiled);
  CHECK(b == a);

  // Another expression: nothing to reuse.
  tuner::CompilePool third(compiler, fam(), *other, configs, dev.arch(), 2, true, &memo);
  const auto c = run(third);
  CHECK(third.reused() == 0);
  CHECK(c.size() == configs.size());
  CHECK(compiler.compile_count() - before > compiled);

  // A memo over its byte limit starts again instead of growing.
  tuner::CompileMemo tiny(1);
  tuner::CompilePool fourth(compiler, fam(), *small, configs, dev.arch(), 2, true, &tiny);
  run(fourth);
  CHECK(tiny.units() < memo.units());
}

// Prefetch jobs: one problem of 4099 elements of `dtype` per expression.
std::vector<tuner::CompilePrefetch::Job> prefetch_jobs(std::initializer_list<const char*> exprs, const char* dtype) {
  std::vector<tuner::CompilePrefetch::Job> jobs;
  for (const char* expr : exprs) jobs.push_back({&fam(), std::shared_ptr<const Problem>(problem(expr, dtype, 4099))});
  return jobs;
}

TEST_CASE("a compile prefetch fills the memo with later sessions' kernels and skips started ones") {
  Compiler compiler;
  const DeviceInfo dev = nominal_device(90);
  const std::vector<tuner::CompilePrefetch::Job> jobs = prefetch_jobs({"z = x * y", "z = x - y", "z = x + y * 2"},
                                                                      "float16");
  // How many of a problem's legal candidates have their kernel in the memo, and how many there are.
  const auto held = [&](const tuner::CompileMemo& memo, const Problem& p) {
    std::size_t pruned = 0, in_memo = 0;
    const auto configs = tuner::legal_candidates(fam(), p, dev, pruned);
    for (const Config& c : configs) {
      const KernelSource src = fam().source(p, c);
      in_memo += memo.find(compiler.binary_key(src.program, src.name_expression, dev.arch())).has_value();
    }
    return std::pair{in_memo, configs.size()};
  };
  tuner::CompileMemo memo;
  {
    tuner::CompilePrefetch prefetch(compiler, dev, memo, jobs, 2, true, 1);  // session 0 compiles its own
    prefetch.wait();
    CHECK(prefetch.units() > 0);
    CHECK(prefetch.compile_seconds() > 0);
  }
  CHECK(held(memo, *jobs[0].problem).first == 0);
  for (std::size_t j : {1, 2}) {
    const auto [in_memo, total] = held(memo, *jobs[j].problem);
    INFO("session ", j);
    CHECK(in_memo == total);
  }
  // Session 1's pool then compiles nothing.
  std::size_t pruned = 0;
  const auto configs = tuner::legal_candidates(fam(), *jobs[1].problem, dev, pruned);
  const std::size_t before = compiler.compile_count();
  tuner::CompilePool pool(compiler, fam(), *jobs[1].problem, configs, dev.arch(), 2, true, &memo);
  std::size_t delivered = 0;
  while (auto batch = pool.next()) {
    REQUIRE(batch->output->ok);
    for (std::size_t b = 0; b < batch->candidates.size(); ++b)
      CHECK(batch->output->resources.at(batch->unit[b]).registers > 0);  // the register report came along
    delivered += batch->candidates.size();
  }
  CHECK(delivered == configs.size());
  CHECK(pool.reused() == configs.size());
  CHECK(compiler.compile_count() == before);
}

// The memo key of config `c`'s unit (its instantiation).
std::string unit_key(const Compiler& compiler, const Problem& p, const Config& c, const std::string& arch) {
  const KernelSource src = fam().source(p, c);
  return compiler.binary_key(src.program, src.name_expression, arch);
}

// The memo keys of `configs`' units (one per distinct instantiation), in order of first appearance.
std::vector<std::string> unit_keys(const Compiler& compiler, const Problem& p, const std::vector<Config>& configs,
                                   const std::string& arch) {
  std::vector<std::string> keys;
  for (const Config& c : configs) {
    const std::string key = unit_key(compiler, p, c, arch);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

TEST_CASE("a pool that starts while the prefetch compiles some of its units waits for them instead of compiling them "
          "again; when their compile fails it compiles them itself") {
  Compiler compiler, elsewhere;  // the pool's, and the stand-in prefetch's (its NVRTC calls are counted apart)
  const DeviceInfo dev = nominal_device(90);
  auto p = problem("z = x * y + 3", "float16", 5001);
  std::size_t pruned = 0;
  // The default and candidates up to 8 distinct units (configs that differ in launch parameters only share one).
  std::vector<Config> configs;
  for (const Config& c : tuner::legal_candidates(fam(), *p, dev, pruned))
    if (unit_keys(compiler, *p, configs, dev.arch()).size() < 8) configs.push_back(c);
  const std::vector<std::string> keys = unit_keys(compiler, *p, configs, dev.arch());
  REQUIRE(keys.size() >= 8);
  // Units 2, 3 and 4 are "in flight" (claimed by someone else) when the pool starts.
  const std::vector<std::string> theirs(keys.begin() + 2, keys.begin() + 5);
  std::vector<std::size_t> their_configs;  // configs whose unit is one of them
  for (std::size_t i = 0; i < configs.size(); ++i)
    if (std::find(theirs.begin(), theirs.end(), unit_key(compiler, *p, configs[i], dev.arch())) != theirs.end())
      their_configs.push_back(i);
  const auto run = [&](tuner::CompilePool& pool) {
    std::set<std::size_t> delivered;
    while (auto batch = pool.next())
      for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
        REQUIRE(batch->output->ok);
        CHECK(batch->output->resources.at(batch->unit[b]).registers > 0);
        CHECK(delivered.insert(batch->candidates[b]).second);  // each candidate once
      }
    return delivered.size();
  };

  SUBCASE("their compile lands: the pool takes it from the memo") {
    tuner::CompileMemo memo;
    REQUIRE(memo.claim(theirs).size() == theirs.size());
    CHECK(memo.claim(theirs).empty());  // claimed once
    std::thread prefetch([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::vector<std::string> names;
      std::string program;
      for (std::size_t i : their_configs) {
        const KernelSource src = fam().source(*p, configs[i]);
        program = src.program;
        if (std::find(names.begin(), names.end(), src.name_expression) == names.end())
          names.push_back(src.name_expression);
      }
      auto out = std::make_shared<const CompiledProgram>(elsewhere.compile(program, names, dev.arch(), true));
      REQUIRE(out->ok);
      std::vector<std::string> landed;
      for (const std::string& name : names) landed.push_back(elsewhere.binary_key(program, name, dev.arch()));
      memo.add(landed, out);
      memo.landed(landed);
    });
    std::size_t delivered = 0;
    {
      tuner::CompilePool pool(compiler, fam(), *p, configs, dev.arch(), 2, true, &memo);
      delivered = run(pool);
      CHECK(pool.reused() == their_configs.size());
    }
    prefetch.join();
    CHECK(delivered == configs.size());
    CHECK(compiler.compile_count() >= 1);
    // The pool compiled every unit but theirs, and none of theirs: its compiles hold keys.size() - 3 units.
    CHECK(memo.units() == keys.size());
    for (const std::string& key : keys) CHECK_FALSE(memo.in_flight(key));
  }

  SUBCASE("their compile fails (lands without a program): the pool compiles those units itself") {
    tuner::CompileMemo memo;
    REQUIRE(memo.claim(theirs).size() == theirs.size());
    std::thread prefetch([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      memo.landed(theirs);
    });
    std::size_t delivered = 0;
    {
      tuner::CompilePool pool(compiler, fam(), *p, configs, dev.arch(), 2, true, &memo);
      delivered = run(pool);
      CHECK(pool.reused() == 0);
    }
    prefetch.join();
    CHECK(delivered == configs.size());
    CHECK(memo.units() == keys.size());
    for (const std::string& key : keys) CHECK_FALSE(memo.in_flight(key));
  }

  SUBCASE("a pool dropped before its compiles start gives its claims back") {
    tuner::CompileMemo memo;
    {
      tuner::CompilePool pool(compiler, fam(), *p, configs, dev.arch(), 1, true, &memo);
    }
    for (const std::string& key : keys) CHECK_FALSE(memo.in_flight(key));
  }
}

TEST_CASE("the prefetch leaves skipped jobs and units in flight alone") {
  Compiler compiler;
  const DeviceInfo dev = nominal_device(90);
  const std::vector<tuner::CompilePrefetch::Job> jobs = prefetch_jobs({"z = x * y", "z = x - y * 5", "z = x + y * 7"},
                                                                      "float32");
  std::size_t pruned = 0;
  const auto keys_of = [&](std::size_t j) {
    return unit_keys(compiler, *jobs[j].problem, tuner::legal_candidates(fam(), *jobs[j].problem, dev, pruned),
                     dev.arch());
  };
  tuner::CompileMemo memo;
  const std::vector<std::string> held_elsewhere = memo.claim(keys_of(1));  // a session's pool compiles job 1
  REQUIRE(!held_elsewhere.empty());
  std::vector<std::size_t> asked;
  std::mutex asked_lock;
  {
    tuner::CompilePrefetch prefetch(compiler, dev, memo, jobs, 2, true, 1, [&](std::size_t j) {
      std::lock_guard lock(asked_lock);
      asked.push_back(j);
      return j == 2;  // another process tunes job 2
    });
    prefetch.wait();
    CHECK(prefetch.units() == 0);
  }
  CHECK(asked == std::vector<std::size_t>{1, 2});
  CHECK(compiler.compile_count() == 0);
  CHECK(memo.units() == 0);
  for (const std::string& key : held_elsewhere) CHECK(memo.in_flight(key));  // still the pool's
}

TEST_CASE("a broken expression fails fast with NVRTC's message") {
  Compiler compiler;
  auto p = problem("z = undefined_function(x)", "float32", 100);
  try {
    tuner::dry_run(compiler, fam(), *p, nominal_device(90), 0);
    FAIL("expected CompileError");
  } catch (const CompileError& e) {
    CHECK(e.log().find("undefined_function") != std::string::npos);
    CHECK(e.family() == "elementwise");
    CHECK(e.options().find("-arch=sm_90") != std::string::npos);
    CHECK(compiler.compile_count() == 1);  // the probe only: the space is not compiled config by config
  }
}

TEST_CASE("ptxas resource report parsing") {
  const std::string log =
      "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z3fooPf\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers\n"
      "ptxas info    : Compiling entry function '_Z3barPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z3barPf\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers\n";
  KernelResources foo = parse_resources(log, "_Z3fooPf"), bar = parse_resources(log, "_Z3barPf");
  CHECK(foo.registers == 40);
  CHECK(foo.stack_bytes == 16);
  CHECK(foo.spill_store_bytes == 8);
  CHECK(foo.spills());
  CHECK(bar.registers == 12);
  CHECK_FALSE(bar.spills());
}

}  // namespace jitune
