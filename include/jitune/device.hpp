// Facts about one CUDA device, read once through the driver API and cached by the Runtime.
#pragma once

#include <cstdint>
#include <string>

namespace jitune {

/// What kernels and search-space constraints need to know about a device.
struct DeviceInfo {
  int ordinal = 0;                             ///< CUDA device ordinal.
  std::string name;                            ///< e.g. "NVIDIA H100 80GB HBM3".
  int cc_major = 0;                            ///< Compute capability, major part.
  int cc_minor = 0;                            ///< Compute capability, minor part.
  int sm_count = 0;                            ///< Streaming multiprocessors.
  std::int64_t l2_bytes = 0;                   ///< L2 cache size.
  std::int64_t global_memory_bytes = 0;        ///< Total device memory.
  int max_threads_per_block = 1024;            ///< Largest legal block.
  int max_threads_per_sm = 2048;               ///< Resident threads per SM.
  int max_shared_per_block = 48 * 1024;        ///< Static + default dynamic shared memory per block.
  int max_shared_per_block_optin = 48 * 1024;  ///< Dynamic shared memory a block may opt into.
  int max_shared_per_sm = 64 * 1024;           ///< Shared memory per SM.
  int registers_per_sm = 65536;                ///< 32-bit registers per SM.
  int registers_per_block = 65536;             ///< 32-bit registers one block may use.
  int warp_size = 32;                          ///< Threads per warp.
  int driver_version = 0;                      ///< cuDriverGetVersion, e.g. 13000.
  int sm_clock_mhz = 0;                        ///< Peak SM clock (0 where the driver does not say).
  int memory_clock_mhz = 0;                    ///< Peak memory clock (0 where the driver does not say).

  /// Compute capability as one number: 90 for 9.0.
  int cc() const noexcept { return cc_major * 10 + cc_minor; }
  /// NVRTC architecture name, e.g. "sm_90".
  std::string arch() const { return "sm_" + std::to_string(cc()); }
};

/// A plausible device for compile-only work without a GPU (dry runs, host tests): cc 9.0 or 8.0 figures.
DeviceInfo nominal_device(int cc);

}  // namespace jitune
