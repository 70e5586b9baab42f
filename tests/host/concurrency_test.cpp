// One cache file, 4 tuner processes writing (100 records and their measurements each) and 4 runtime processes
// looking problems up at the same time: nothing lost, no "database is locked" reaching anyone.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "runtime/runtime_impl.hpp"
#include "templates/elementwise/elementwise.hpp"

namespace jitune {
namespace {

namespace fs = std::filesystem;

cache::Record record(int writer, int i) {
  const auto& fam = templates::elementwise::elementwise_family();
  auto p = fam.make_problem({{"expr", "z = x * y"}, {"dtype", "float32"}, {"n", std::to_string(writer * 100000 + i + 1)}});
  cache::Record r;
  r.key = record_key(fam, *p, Config::parse("block=256,pack=4,unroll=2,waves=8"), nominal_device(90), "13.0");
  r.group = p->group();
  r.features = p->features();
  r.config = "block=256,pack=4,unroll=2,waves=8";
  r.time_us = 1 + i;
  r.reps = 10;
  r.default_time_us = 2 + i;
  r.default_config = "block=256,pack=4,unroll=1,waves=32";
  r.jitune_version = "test";
  r.created_at = cache::utc_now();
  return r;
}

}  // namespace

TEST_CASE("4 tuner and 4 runtime processes on one cache file lose nothing and never see a lock error") {
  const fs::path dir = fs::temp_directory_path() / ("jitune_conc_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const fs::path file = dir / "tuning.sqlite";
  int go[2];
  REQUIRE(pipe(go) == 0);
  std::vector<pid_t> kids;
  for (int w = 0; w < 8; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(go[1]);
      char c;
      if (read(go[0], &c, 1) < 0) _exit(9);  // start together
      try {
        if (w < 4) {
          cache::Store s(file, cache::OpenMode::kReadWrite);
          for (int i = 0; i < 100; ++i) {
            cache::Record r = record(w, i);
            for (int m = 0; m < 3; ++m)
              s.put(cache::Measurement{r.key, "block=" + std::to_string(128 << m) + ",pack=4,unroll=1,waves=1", "ok",
                                       "", 1.0 + m, 0.01, 5, cache::utc_now()});
            s.put(r);
          }
        } else {
          std::vector<std::string> notes;
          auto s = open_user_store(file, notes);
          if (!s) _exit(4);
          const auto& fam = templates::elementwise::elementwise_family();
          for (int i = 0; i < 100; ++i) {
            auto p = fam.make_problem({{"expr", "z = x * y"}, {"dtype", "float32"}, {"n", std::to_string(i * 1000 + 7)}});
            Decision d = lookup_decision(fam, *p, nominal_device(90), "13.0", {s.get()});
            for (const auto& n : d.explanation.notes)
              if (n.find("failed") != std::string::npos) _exit(5);  // a lookup error surfaced
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "process %d: %s\n", w, e.what());
        _exit(2);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(go[0]);
  // The schema exists before the children start: readers then test concurrent access, not file creation (the
  // store test races creation itself).
  { cache::Store s(file, cache::OpenMode::kReadWrite); }
  close(go[1]);
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  cache::Store s(file, cache::OpenMode::kReadOnly);
  CHECK(s.records().size() == 400);
  std::size_t measured = 0;
  for (const auto& r : s.records()) measured += s.measurements(r.key, {r.key.template_hash}).size();
  CHECK(measured == 1200);
  fs::remove_all(dir);
}

}  // namespace jitune
