// Fault isolation while tuning: candidates that hit an illegal address, trap, loop forever or compute the wrong
// result are recorded with their reason, the worker is restarted, tuning goes on, every verdict is in the store,
// and the caller's own CUDA context is untouched.
#include <jitune/jitune.hpp>

#include "gpu_util.hpp"
#include "tests/support/faulty_families.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

TEST_CASE("a tuning run survives faulting, trapping, hanging and wrong candidates") {
  test::register_faulty_families();
  test::TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = family("test_faults");
  auto problem = fam.make_problem({{"n", "100003"}});
  tuner::TuneOptions opt;
  opt.isolation = tuner::TuneOptions::Isolation::kWorker;
  opt.worker = JITUNE_TEST_WORKER;
  opt.candidate_timeout_s = 4;
  opt.min_time_ms = 0.1;
  tuner::TuneReport r = tuner::tune(rt, fam, *problem, opt);
  CHECK(r.isolated);
  REQUIRE(r.candidates.size() == 10);
  for (const auto& c : r.candidates) {
    INFO(c.config.text(), ": ", c.status, " ", c.reason);
    switch (c.config.at("mode")) {
      case test::kGood: CHECK((c.status == "ok" || c.status == "cut")); break;
      case test::kIllegalAddress:
        CHECK(c.status == "launch_failed");
        CHECK(c.reason.find("ILLEGAL_ADDRESS") != std::string::npos);
        break;
      case test::kTrap: CHECK(c.status == "launch_failed"); break;
      case test::kEndlessLoop:
        CHECK(c.status == "timeout");
        CHECK(c.reason.find("killed") != std::string::npos);
        break;
      case test::kWrongResult:
        CHECK(c.status == "wrong_result");
        CHECK(c.reason.find("differ") != std::string::npos);
        break;
    }
  }
  CHECK(r.best.at("mode") == test::kGood);
  CHECK(r.worker_restarts >= 6);  // 2 illegal addresses, 2 traps, 2 endless loops
  CHECK(r.stored);
  // Every verdict, failures included, is in the store with its reason.
  auto key = internal::impl(rt).record_key(fam, *problem, r.best);
  auto ms = internal::impl(rt).user_store->measurements(key, template_hashes(fam));
  CHECK(ms.size() == 10);
  int timeouts = 0;
  for (const auto& m : ms) timeouts += m.status == "timeout";
  CHECK(timeouts == 2);
  // The caller's context still works.
  test::Buffer a(4096), b(4096);
  a.upload(test::random_values(DType::kFloat32, 1024, 1), 0);
  elementwise(rt, "y = x + 1", {a.at(0)}, b.at(0), 1024, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
}

TEST_CASE("a session prepared ahead runs on its worker and seed; one prepared for another problem is ignored") {
  test::TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& fam = family("elementwise");
  std::shared_ptr<const Problem> a =
      fam.make_problem({{"expr", "z = x * y + 1"}, {"dtype", "float32"}, {"n", "300007"}});
  std::shared_ptr<const Problem> b =
      fam.make_problem({{"expr", "z = x - y"}, {"dtype", "float16"}, {"n", "4099"}});
  tuner::TuneOptions opt;
  opt.isolation = tuner::TuneOptions::Isolation::kWorker;
  opt.worker = JITUNE_TEST_WORKER;
  opt.strategy = tuner::Strategy::kRandom;
  opt.budget = 4;
  opt.min_time_ms = 0.1;
  auto for_a = tuner::prepare_session(rt, fam, a, opt);
  auto for_b = tuner::prepare_session(rt, fam, b, opt);
  REQUIRE(for_a);
  REQUIRE(for_b);
  CHECK(for_a->signature == a->signature());

  // A's session takes its prepared worker: the inputs it built verify against the reference it built.
  opt.prepared = for_a;
  tuner::TuneReport r = tuner::tune(rt, fam, *a, opt);
  CHECK(r.isolated);
  CHECK_FALSE(for_a->runner);  // taken over
  REQUIRE(r.candidates.size() == 4);
  // A few configs of the space spill (block 1024, pack 4, unroll 8) and are rejected before they run; every other
  // one verifies against the prepared reference.
  const auto verified = [](const tuner::TuneReport& report) {
    int timed = 0;
    for (const auto& c : report.candidates) {
      INFO(c.config.text(), ": ", c.status, " ", c.reason);
      if (c.status == "resources_exceeded") CHECK(c.reason.find("spills") != std::string::npos);
      else CHECK((c.status == "ok" || c.status == "cut"));
      timed += c.status == "ok";
    }
    return timed;
  };
  CHECK(verified(r) >= 1);

  // B's prepared session given to A's tuning is left alone, and A tunes as usual.
  opt.prepared = for_b;
  r = tuner::tune(rt, fam, *a, opt);
  CHECK(for_b->runner);
  CHECK(verified(r) >= 1);
  // ... and B still runs on it afterwards.
  r = tuner::tune(rt, fam, *b, opt);
  CHECK_FALSE(for_b->runner);
  CHECK(r.best_us > 0);

  // In process there is no worker to prepare.
  opt.isolation = tuner::TuneOptions::Isolation::kInProcess;
  CHECK_FALSE(tuner::prepare_session(rt, fam, a, opt));
}

TEST_CASE("tuning in process is the fallback when no worker is wanted") {
  test::TempDir dir;
  Runtime rt(test::isolated_options(dir));
  auto problem = family("elementwise").make_problem({{"expr", "z = x - y"}, {"dtype", "float16"}, {"n", "50001"}});
  tuner::TuneOptions opt;
  opt.isolation = tuner::TuneOptions::Isolation::kInProcess;
  opt.strategy = tuner::Strategy::kRandom;
  opt.budget = 6;
  opt.min_time_ms = 0.1;
  tuner::TuneReport r = tuner::tune(rt, family("elementwise"), *problem, opt);
  CHECK_FALSE(r.isolated);
  CHECK(r.best_us > 0);
}

TEST_CASE("a missing worker is a clear error when isolation is required") {
  test::TempDir dir;
  Runtime rt(test::isolated_options(dir));
  auto problem = family("elementwise").make_problem({{"expr", "z = x"}, {"dtype", "float32"}, {"n", "100"}});
  tuner::TuneOptions opt;
  opt.isolation = tuner::TuneOptions::Isolation::kWorker;
  opt.worker = (dir.path / "no-such-worker").string();
  CHECK_THROWS_WITH_AS(tuner::tune(rt, family("elementwise"), *problem, opt), doctest::Contains("no-such-worker"),
                       Error);
}

}  // namespace
}  // namespace jitune
