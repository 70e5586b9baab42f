// The CUDA driver API, loaded at run time from libcuda.so.1 so that jitune programs start (and report "no device")
// on machines without a driver. One check macro for the driver family; RAII handles for what jitune allocates.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include <jitune/error.hpp>

namespace jitune::driver {

/// Driver entry points jitune uses. Resolved once; calling any throws NoDevice when the library was not found.
struct Api {
#define JITUNE_DRIVER_FN(name) decltype(&::name) name = nullptr;
#include "runtime/driver_functions.inc"
#undef JITUNE_DRIVER_FN
};

/// The loaded API, or throws NoDevice saying why (no libcuda.so.1, cuInit failed, ...).
const Api& api();
/// Empty when the driver loaded and cuInit succeeded; otherwise why not (never throws).
const std::string& load_error() noexcept;

/// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered".
std::string error_text(CUresult result);

/// Throws CudaError "<what> failed: <error_text>" when result != CUDA_SUCCESS.
void check(CUresult result, const char* what);

}  // namespace jitune::driver

/// Calls a driver function through the loaded table and throws CudaError naming the call on failure.
#define JITUNE_CU_CHECK(call_expr) ::jitune::driver::check(::jitune::driver::api().call_expr, #call_expr)

namespace jitune::driver {

/// Makes the device's primary context current on this thread (cheap when it already is).
void make_current(CUcontext context);

/// A loaded module; unloads on destruction.
class Module {
 public:
  Module() = default;
  explicit Module(const void* image);
  ~Module();
  Module(Module&& other) noexcept : module_(other.module_) { other.module_ = nullptr; }
  Module& operator=(Module&& other) noexcept;
  CUfunction function(const std::string& lowered_name) const;
  CUmodule get() const noexcept { return module_; }

 private:
  CUmodule module_ = nullptr;
};

/// Device memory; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) { other.ptr_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  CUdeviceptr get() const noexcept { return ptr_; }
  void* data() const noexcept { return reinterpret_cast<void*>(ptr_); }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

/// A CUDA event; destroyed on destruction.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const noexcept { return event_; }

 private:
  CUevent event_ = nullptr;
};

/// A non-blocking stream; destroyed on destruction.
class StreamHandle {
 public:
  StreamHandle();
  ~StreamHandle();
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  CUstream get() const noexcept { return stream_; }

 private:
  CUstream stream_ = nullptr;
};

}  // namespace jitune::driver
