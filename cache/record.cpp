// A record's shape checks and the texts messages about records use.
#include "cache/record.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

namespace jitune::cache {

std::string format_number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string describe(const RecordKey& key) {
  return key.family + " [" + key.signature + "] on " + key.device_name + " (cc " + std::to_string(key.cc) +
         ", " + std::to_string(key.sm_count) + " SMs, NVRTC " + key.nvrtc_version + ", template " +
         key.template_hash + ")";
}

std::string check_finite(const Record& record) {
  if (!std::isfinite(record.time_us)) return "time_us is not finite";
  if (!std::isfinite(record.spread)) return "spread is not finite";
  if (!std::isfinite(record.default_time_us)) return "default_time_us is not finite";
  for (std::size_t i = 0; i < record.features.size(); ++i) {
    if (!std::isfinite(record.features[i])) return "features[" + std::to_string(i) + "] is not finite";
  }
  return {};
}

std::string check_record_shape(const Record& record) {
  const std::pair<const char*, const std::string*> required[] = {
      {"family", &record.key.family},       {"template_hash", &record.key.template_hash},
      {"signature", &record.key.signature}, {"device_name", &record.key.device_name},
      {"config", &record.config},           {"nvrtc_version", &record.key.nvrtc_version},
  };
  for (const auto& [name, value] : required) {
    if (value->empty()) return std::string(name) + " is empty";
  }
  if (record.key.cc < 10 || record.key.cc > 200) {
    return "cc must be in 10..200 (got " + std::to_string(record.key.cc) + ")";
  }
  if (record.key.sm_count < 1 || record.key.sm_count > 10000) {
    return "sm_count must be in 1..10000 (got " + std::to_string(record.key.sm_count) + ")";
  }
  if (!std::isfinite(record.time_us) || record.time_us <= 0) {
    return "time_us must be finite and > 0 (got " + format_number(record.time_us) + ")";
  }
  if (!std::isfinite(record.default_time_us) || record.default_time_us < 0) {
    return "default_time_us must be finite and >= 0 (got " + format_number(record.default_time_us) + ")";
  }
  if (!std::isfinite(record.spread) || record.spread < 0) {
    return "spread must be finite and >= 0 (got " + format_number(record.spread) + ")";
  }
  if (record.reps < 1) return "reps must be >= 1 (got " + std::to_string(record.reps) + ")";
  for (std::size_t i = 0; i < record.features.size(); ++i) {
    if (!std::isfinite(record.features[i])) {
      return "features[" + std::to_string(i) + "] must be finite (got " + format_number(record.features[i]) +
             ")";
    }
  }
  return {};
}

const Record& majority_record(const std::vector<Record>& repeats, double noise, int* votes) {
  std::size_t fastest = 0;
  for (std::size_t i = 1; i < repeats.size(); ++i)
    if (repeats[i].time_us < repeats[fastest].time_us) fastest = i;
  const double bound = repeats[fastest].time_us * (1.0 + noise);
  // Per config: its votes and its fastest record; only configs whose best time is within the bound compete.
  std::size_t best = fastest;
  int best_votes = 0;
  for (std::size_t i = 0; i < repeats.size(); ++i) {
    int count = 0;
    std::size_t quickest = i;
    for (std::size_t j = 0; j < repeats.size(); ++j) {
      if (repeats[j].config != repeats[i].config) continue;
      ++count;
      if (repeats[j].time_us < repeats[quickest].time_us) quickest = j;
    }
    if (repeats[quickest].time_us > bound) continue;
    if (count > best_votes || (count == best_votes && repeats[quickest].time_us < repeats[best].time_us)) {
      best = quickest;
      best_votes = count;
    }
  }
  if (votes) *votes = best_votes;
  return repeats[best];
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

}  // namespace jitune::cache
