// Loading libcuda with dlopen and resolving the versioned driver symbols that cuda.h's macros name.
#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <mutex>

namespace jitune::driver {
namespace {

#define JITUNE_STR2(x) #x
#define JITUNE_STR(x) JITUNE_STR2(x)

struct Loaded {
  Api api;
  std::string error;
};

const Loaded& loaded() {
  static const Loaded state = [] {
    Loaded s;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      s.error = std::string("the CUDA driver library libcuda.so.1 could not be loaded (") + (why ? why : "?") +
                "); install the NVIDIA driver or run on a machine with a GPU";
      return s;
    }
    // JITUNE_STR expands cuda.h's macros first, so cuMemAlloc resolves to its current symbol cuMemAlloc_v2.
#define JITUNE_DRIVER_FN(name)                                                                  \
  s.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, JITUNE_STR(name)));               \
  if (!s.api.name && s.error.empty())                                                           \
    s.error = std::string("libcuda.so.1 lacks ") + JITUNE_STR(name) + "; update the NVIDIA driver";
#include "runtime/driver_functions.inc"
#undef JITUNE_DRIVER_FN
    if (!s.error.empty()) return s;
    CUresult r = s.api.cuInit(0);
    if (r != CUDA_SUCCESS) {
      const char* name = nullptr;
      s.api.cuGetErrorName(r, &name);
      s.error = std::string("cuInit failed: ") + (name ? name : "unknown error") +
                " (no usable GPU: check nvidia-smi, CUDA_VISIBLE_DEVICES and the driver installation)";
    }
    return s;
  }();
  return state;
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw NoDevice(l.error);
  return l.api;
}

const std::string& load_error() noexcept { return loaded().error; }

std::string error_text(CUresult result) {
  const Api& a = loaded().api;
  const char* name = nullptr;
  const char* text = nullptr;
  if (a.cuGetErrorName) a.cuGetErrorName(result, &name);
  if (a.cuGetErrorString) a.cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(static_cast<int>(result))) + ": " +
         (text ? text : "no description");
}

void check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS)
    throw CudaError(std::string(what) + " failed: " + error_text(result), static_cast<int>(result));
}

void make_current(CUcontext context) {
  CUcontext current = nullptr;
  const Api& a = api();
  if (a.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != context) JITUNE_CU_CHECK(cuCtxSetCurrent(context));
}

Module::Module(const void* image) { JITUNE_CU_CHECK(cuModuleLoadData(&module_, image)); }

Module::~Module() {
  if (module_) api().cuModuleUnload(module_);  // errors ignored: destructors never throw
}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    if (module_) api().cuModuleUnload(module_);
    module_ = other.module_;
    other.module_ = nullptr;
  }
  return *this;
}

CUfunction Module::function(const std::string& lowered_name) const {
  CUfunction f = nullptr;
  check(api().cuModuleGetFunction(&f, module_, lowered_name.c_str()),
        ("cuModuleGetFunction(" + lowered_name + ")").c_str());
  return f;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  CUresult r = api().cuMemAlloc(&ptr_, bytes);
  if (r != CUDA_SUCCESS)
    throw CudaError("cuMemAlloc of " + std::to_string(bytes) + " bytes failed: " + error_text(r) +
                        " (free device memory or use a smaller problem)",
                    static_cast<int>(r));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) api().cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) api().cuMemFree(ptr_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = 0;
  }
  return *this;
}

Event::Event() { JITUNE_CU_CHECK(cuEventCreate(&event_, CU_EVENT_DEFAULT)); }
Event::~Event() {
  if (event_) api().cuEventDestroy(event_);
}

StreamHandle::StreamHandle() { JITUNE_CU_CHECK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING)); }
StreamHandle::~StreamHandle() {
  if (stream_) api().cuStreamDestroy(stream_);
}

}  // namespace jitune::driver
