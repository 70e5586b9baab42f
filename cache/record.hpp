// A tuning record and a measurement: what they are keyed by and hold (DESIGN.md), whether a record is well
// formed, and the small texts messages about records use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitune::cache {

/// What a tuning record is keyed by (DESIGN.md): family, template hash, problem signature, device name,
/// compute capability, SM count, NVRTC version.
struct RecordKey {
  std::string family;
  std::string template_hash;  ///< template_hash() of the family's template when tuned.
  std::string signature;      ///< Problem::signature().
  std::string device_name;    ///< e.g. "NVIDIA H100 80GB HBM3".
  int cc = 0;                 ///< Compute capability as one number (90).
  int sm_count = 0;
  std::string nvrtc_version;  ///< "13.0".
  friend bool operator==(const RecordKey&, const RecordKey&) = default;
};

/// A tuned winner: what the dispatcher looks up.
struct Record {
  RecordKey key;
  std::string group;             ///< Problem::group(), for the nearest-problem lookup.
  std::vector<double> features;  ///< Problem::features().
  std::string config;            ///< Canonical config text of the winner.
  double time_us = 0;            ///< Median time of the winner.
  double spread = 0;             ///< Relative spread of its repetitions ((p90 - p10) / median).
  int reps = 0;                  ///< Repetitions behind the median.
  double default_time_us = 0;    ///< Heuristic default's median on the same problem (0 if not measured).
  std::string default_config;    ///< The heuristic default's config text.
  std::string jitune_version;
  int driver_version = 0;  ///< cuDriverGetVersion of the machine that tuned.
  std::string created_at;  ///< UTC, ISO 8601 ("2026-11-21T19:40:00Z").
  // The tuning GPU's fingerprint beyond the key: two records of one device name that disagree here are not the same
  // model (import and merge refuse the second). 0: not recorded (records of earlier jitune versions).
  int memory_mb = 0;           ///< Total device memory, MiB.
  int sm_clock_mhz = 0;        ///< Peak SM clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE).
  int memory_clock_mhz = 0;    ///< Peak memory clock (CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).
  // Provenance: where it was tuned. Empty: not recorded.
  std::string host;   ///< Host name of the tuning machine.
  std::string shard;  ///< "k/N" when a sharded run tuned it (--shard, a --devices worker); empty otherwise.
};

/// Why two records of one device name cannot describe the same GPU model (compute capability, memory size or
/// clocks, each compared where both record it; memory and clocks within 2%), empty if they can. `known` is the
/// record seen first (stored, or earlier in an import).
std::string fingerprint_conflict(const Record& known, const Record& incoming);

/// One candidate's outcome, failures included (KTT-style reasons). Written as soon as it is measured.
struct Measurement {
  RecordKey key;
  std::string config;
  std::string status;  ///< "ok", "cut" (stopped early, slower), "compile_failed", "wrong_result",
                       ///< "launch_failed", "resources_exceeded", "timeout", "invalid".
  std::string reason;  ///< Compiler log excerpt, mismatch description, ... (empty for ok).
  double time_us = 0;  ///< Median (0 when not timed).
  double spread = 0;
  int reps = 0;
  std::string created_at;
};

/// Repeated tunings of one key (shards or reruns that tuned the same problem on the same device model): the
/// record of the config that most of them chose among the configs whose best time is within `noise` (relative,
/// e.g. 0.03) of the fastest, and of that config the fastest record; ties go to the faster config. A config
/// measured just outside the noise bound never wins on votes; one that is faster by more than the noise always
/// does. `votes` (when given) receives how many records chose the winner's config. `repeats` must not be empty.
const Record& majority_record(const std::vector<Record>& repeats, double noise, int* votes = nullptr);

/// Checks the numbers and key fields of a record (finite positive time, reps >= 1, cc 10..200, ...): what is
/// wrong, empty if nothing.
std::string check_record_shape(const Record& record);
/// What is wrong with a record's numbers for storing (NaN / infinity cannot be kept), empty if nothing.
std::string check_finite(const Record& record);
/// "family [signature] on device (cc N, M SMs, NVRTC v, template h)", for messages.
std::string describe(const RecordKey& key);
/// A number in messages, "%.6g".
std::string format_number(double value);
/// Current UTC time in ISO 8601, e.g. "2026-11-21T19:40:00Z".
std::string utc_now();

}  // namespace jitune::cache
