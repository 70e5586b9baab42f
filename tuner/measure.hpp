// Measurement on the GPU: device buffers for a workload, poisoned outputs, device-side comparison with the CPU
// reference, and event timing of single launches with the L2 flushed between repetitions.
#pragma once

#include <vector>

#include "runtime/runtime_impl.hpp"

namespace jitune::tuner {

/// A workload uploaded to the device, with its reference outputs.
class DeviceWorkload {
 public:
  DeviceWorkload(const Family& family, const Problem& problem, const Workload& host,
                 const std::vector<std::vector<std::byte>>& reference);
  /// Poisons the outputs (0xFF bytes: NaN for floating types) or restores their initial contents.
  void reset_outputs(CUstream stream) const;
  std::span<void* const> inputs() const noexcept { return inputs_; }
  std::span<void* const> outputs() const noexcept { return outputs_; }
  /// The buffers in the family's buffer order (Family::buffers: inputs for kIn, outputs for kOut / kInOut, null
  /// for an absent optional buffer), with their alignment classes and a workspace of at least
  /// prep.workspace_bytes (grown on demand, kept between candidates).
  Bindings bindings(const LaunchPrep& prep);
  /// What the runtime does before a launch with `prep`: zeroes the workspace range and the listed outputs.
  void prepare_launch(const LaunchPrep& prep, CUstream stream) const;
  const std::vector<driver::DeviceBuffer>& expected() const noexcept { return expected_; }
  /// The allocations behind outputs() (an output placed misaligned starts placement bytes in).
  const std::vector<driver::DeviceBuffer>& output_buffers() const noexcept { return output_buffers_; }
  /// Bytes of output `i` the reference covers.
  std::size_t output_bytes(std::size_t i) const noexcept { return output_bytes_[i]; }
  const std::vector<OutputCheck>& checks() const noexcept { return checks_; }

 private:
  std::vector<driver::DeviceBuffer> input_buffers_, output_buffers_, initial_, expected_;
  std::vector<void*> inputs_, outputs_;
  std::vector<std::size_t> output_offset_, output_bytes_;
  std::vector<const void*> bound_;        // family buffer order
  std::vector<std::uint64_t> bound_bytes_;
  std::vector<std::uint8_t> alignment_;
  std::unique_ptr<driver::DeviceBuffer> workspace_;
  std::vector<OutputCheck> checks_;
};

/// The tuner's own kernels (templates/common/tuner_kernels.cuh), compiled once and kept in the binary cache.
class TunerKernels {
 public:
  explicit TunerKernels(Runtime::Impl& impl) : impl_(impl) {}
  /// jitune::compare_outputs<T> for `dtype`.
  CUfunction compare(DType dtype);
  /// jitune::spin_ns.
  CUfunction spin();

 private:
  CUfunction load(const std::string& name_expression);
  Runtime::Impl& impl_;
  std::vector<std::unique_ptr<driver::Module>> modules_;
  std::vector<std::pair<std::string, CUfunction>> functions_;
};

/// Compares device outputs with device references through compare_outputs.
class DeviceComparer {
 public:
  explicit DeviceComparer(TunerKernels& kernels) : kernels_(kernels) {}
  /// Compares every output of `w`; returns a mismatch description, empty when all match.
  std::string compare(const DeviceWorkload& w, CUstream stream);

 private:
  TunerKernels& kernels_;
  driver::DeviceBuffer result_{2 * sizeof(unsigned long long)};
};

/// How repetitions see the L2 cache.
enum class L2Mode {
  kAuto,   ///< Problems moving >= 4x the L2: single launches (the L2 cannot help); smaller ones: kWarm.
  kFlush,  ///< Single launches, the L2 flushed (a copy through a buffer twice its size) before each.
  kWarm,   ///< Back-to-back launches queued behind a spin kernel: steady state with the data L2-resident, no host
           ///< gaps (how small problems run in a pipeline, and how bench-cases.md times them).
};

/// Event timing of launches in the chosen L2 mode.
class LaunchTimer {
 public:
  LaunchTimer(TunerKernels& kernels, const DeviceInfo& device, double problem_bytes, int max_samples, L2Mode mode,
              CUstream stream);
  /// `samples` timings of `f`, microseconds per launch. In warm mode each sample is launches_per_sample() launches
  /// between two events, sized from the first call's estimate.
  std::vector<double> time(CUfunction f, const LaunchShape& shape, KernelArgs& args, int samples);
  /// time() of a call of several kernels, launched in order: microseconds per call.
  std::vector<double> time(std::span<const CallLaunch> call, int samples);
  /// Launches behind one sample (1 unless warm).
  int launches_per_sample(double estimate_us) const noexcept;
  L2Mode mode() const noexcept { return mode_; }

 private:
  double probe(std::span<const CallLaunch> call);
  void launch(std::span<const CallLaunch> call);
  TunerKernels& kernels_;
  CUstream stream_;
  L2Mode mode_;
  driver::DeviceBuffer flush_;
  std::vector<std::unique_ptr<driver::Event>> start_, stop_;
};

/// "auto", "flush" or "warm".
std::string_view l2_mode_name(L2Mode mode) noexcept;
/// The mode l2_mode_name names; throws InvalidArgument, quoting `name`, for any other text.
L2Mode parse_l2_mode(std::string_view name);

/// Median and (p90 - p10) / median of a sample.
std::pair<double, double> median_spread(std::vector<double> samples);
/// The q-quantile (0..1) of an ascending, non-empty sample: the nearest rank, as median_spread's p10 / p90.
double quantile_of_sorted(const std::vector<double>& sorted, double q);

/// Lowers the calling thread's CPU priority to nice 10 (Linux: per thread, inherited by threads it starts), for work
/// done in the background of a tuning session. Needs no privilege; when it fails the work just competes evenly.
void background_priority() noexcept;

}  // namespace jitune::tuner
