// The tuner's text helpers: L2 mode names both ways, and the per-status candidate counts of reports.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <jitune/error.hpp>

#include "tuner/measure.hpp"
#include "tuner/tuner.hpp"

namespace jitune::tuner {

TEST_CASE("L2 modes parse from their names and from nothing else") {
  for (const L2Mode mode : {L2Mode::kAuto, L2Mode::kFlush, L2Mode::kWarm})
    CHECK(parse_l2_mode(l2_mode_name(mode)) == mode);
  CHECK(parse_l2_mode("warm") == L2Mode::kWarm);
  CHECK(parse_l2_mode("flush") == L2Mode::kFlush);
  CHECK(parse_l2_mode("auto") == L2Mode::kAuto);
  for (const char* bad : {"", "Warm", "flushed", " auto", "cold"}) {
    CAPTURE(bad);
    try {
      parse_l2_mode(bad);
      FAIL("accepted");
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      CHECK(message.find("'" + std::string(bad) + "'") != std::string::npos);
      CHECK(message.find("auto, flush or warm") != std::string::npos);
    }
  }
}

TEST_CASE("status counts list each status once, in name order") {
  std::vector<CandidateResult> candidates(6);
  const char* statuses[] = {"ok", "cut", "ok", "compile_failed", "ok", "cut"};
  for (std::size_t i = 0; i < candidates.size(); ++i) candidates[i].status = statuses[i];
  CHECK(status_counts(candidates) == " compile_failed=1 cut=2 ok=3");
  CHECK(status_counts({}).empty());
}

}  // namespace jitune::tuner
