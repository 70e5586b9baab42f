// A record's shape checks and the texts messages about records use.
#include "cache/record.hpp"

#include <algorithm>
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
  if (record.memory_mb < 0) return "memory_mb must be >= 0 (got " + std::to_string(record.memory_mb) + ")";
  if (record.sm_clock_mhz < 0 || record.sm_clock_mhz > 100000)
    return "sm_clock_mhz must be in 0..100000 (got " + std::to_string(record.sm_clock_mhz) + ")";
  if (record.memory_clock_mhz < 0 || record.memory_clock_mhz > 100000)
    return "memory_clock_mhz must be in 0..100000 (got " + std::to_string(record.memory_clock_mhz) + ")";
  for (std::size_t i = 0; i < record.features.size(); ++i) {
    if (!std::isfinite(record.features[i])) {
      return "features[" + std::to_string(i) + "] must be finite (got " + format_number(record.features[i]) +
             ")";
    }
  }
  return {};
}

std::string fingerprint_conflict(const Record& known, const Record& incoming) {
  auto cc_text = [](int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); };
  if (known.key.cc != incoming.key.cc)
    return "compute capability " + cc_text(known.key.cc) + " there, " + cc_text(incoming.key.cc) + " here";
  // Both recorded and more than 2% apart: drivers reserve slightly different amounts of memory, clocks are fixed.
  auto apart = [](double a, double b) { return a > 0 && b > 0 && std::abs(a - b) > 0.02 * std::max(a, b); };
  if (apart(static_cast<double>(known.memory_mb), static_cast<double>(incoming.memory_mb)))
    return "memory " + std::to_string(known.memory_mb) + " MiB there, " + std::to_string(incoming.memory_mb) +
           " MiB here";
  if (apart(known.sm_clock_mhz, incoming.sm_clock_mhz))
    return "SM clock " + std::to_string(known.sm_clock_mhz) + " MHz there, " + std::to_string(incoming.sm_clock_mhz) +
           " MHz here";
  if (apart(known.memory_clock_mhz, incoming.memory_clock_mhz))
    return "memory clock " + std::to_string(known.memory_clock_mhz) + " MHz there, " +
           std::to_string(incoming.memory_clock_mhz) + " MHz here";
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
