// Exceptions thrown by jitune for misuse and broken environments. Normal tuning outcomes (a candidate that fails to
// compile or verify) are values, not exceptions: see the tuner's CandidateResult.
#pragma once

#include <stdexcept>
#include <string>

namespace jitune {

/// Base class of every exception jitune throws. The message says what happened, with which input, and what to do.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller passed an argument that cannot work (bad shape, null pointer, malformed expression, unknown name).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A CUDA driver API call failed; the message names the call and the driver's error name.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, int code) : Error(message), code_(code) {}
  /// The driver's CUresult value.
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// No usable CUDA device or driver was found (no GPU, no libcuda, wrong ordinal).
class NoDevice : public Error {
 public:
  using Error::Error;
};

/// NVRTC rejected a kernel. Carries the family, configuration, options and the full compile log.
class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string family, std::string config, std::string options,
               std::string log)
      : Error(message),
        family_(std::move(family)),
        config_(std::move(config)),
        options_(std::move(options)),
        log_(std::move(log)) {}
  /// Kernel family whose template failed.
  const std::string& family() const noexcept { return family_; }
  /// Canonical configuration text, e.g. "block=256,pack=4".
  const std::string& config() const noexcept { return config_; }
  /// NVRTC options used, space separated.
  const std::string& options() const noexcept { return options_; }
  /// NVRTC's full program log.
  const std::string& log() const noexcept { return log_; }

 private:
  std::string family_, config_, options_, log_;
};

/// The SQLite tuning store could not be opened, read or written.
class StoreError : public Error {
 public:
  using Error::Error;
};

}  // namespace jitune
