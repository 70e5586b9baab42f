// The kernel loader: a decided instantiation's binary (binary cache, else NVRTC), its module and function
// loaded and readied for launch, the launch itself, and the device-memory range check of the one pointer
// check.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "runtime/runtime_impl.hpp"

namespace jitune {

CachedBinary Runtime::Impl::binary(const Family& family, const Problem& problem, const Config& config, bool fresh,
                                   bool* cached) {
  return binary_of(family.source(problem, config), family, config, fresh, cached);
}

CachedBinary Runtime::Impl::binary_of(const KernelSource& src, const Family& family, const Config& config,
                                      bool fresh, bool* cached) {
  const std::string bkey = compiler.binary_key(src.program, src.name_expression, device.arch());
  if (cached) *cached = !fresh;
  if (!fresh) {
    if (auto hit = binaries.get(bkey)) return *hit;
    for (const auto& shipped : shipped_binaries)
      if (auto hit = shipped->get(bkey)) return *hit;
  }
  if (cached) *cached = false;
  CompiledProgram out = compiler.compile(src.program, {src.name_expression}, device.arch(), false);
  if (!out.ok)
    throw CompileError("NVRTC could not compile " + std::string(family.name()) + " with config " +
                           config.text() + " for " + device.arch() + ":\n" + out.log,
                       std::string(family.name()), config.text(), out.options, out.log);
  CachedBinary b{std::move(out.cubin), out.lowered.at(0)};
  binaries.put(bkey, b);
  return b;
}

const Kernel& Runtime::Impl::kernel(const Family& family, const Problem& problem, const Config& config,
                                    bool in_capture) {
  const std::string map_key = std::string(family.name()) + '\n' + problem.signature() + '\n' + config.text();
  {
    std::shared_lock lock(mutex_);
    if (auto it = kernels_.find(map_key); it != kernels_.end()) return *it->second;
  }
  if (in_capture)
    refuse_in_capture(std::string(family.name()), problem.signature(), "compile and load kernel config " + config.text());
  auto k = std::make_unique<Kernel>();
  k->shape = family.launch_shape(problem, config, device);
  k->config = config;
  k->prep = family.prep(problem, config);
  const KernelSource src = family.source(problem, config);
  bool cached = false;
  CachedBinary b = binary_of(src, family, config, false, &cached);
  k->function = load_function(map_key, std::move(b), cached, src, family, config);
  ready_function(k->function, k->shape, device);
  load_steps(family, problem, *k, map_key);
  std::unique_lock lock(mutex_);
  auto [it, inserted] = kernels_.try_emplace(map_key, std::move(k));
  return *it->second;
}

void Runtime::Impl::load_steps(const Family& family, const Problem& problem, Kernel& kernel,
                               const std::string& key) {
  std::size_t index = 0;
  for (StepKernel& step : family.steps(problem, kernel.config, device)) {
    if (kernel.prep.workspace_bytes == 0)
      throw Error("jitune internal error: " + std::string(family.name()) + " config " + kernel.config.text() +
                  " launches steps without a workspace to pass their data through");
    // Steps are few and shared by a problem's configs (a layout change): compiled on first use, then loaded
    // from the binary cache.
    bool cached = false;
    CachedBinary b = binary_of(step.source, family, kernel.config, false, &cached);
    KernelStep loaded{load_function(key + "\nstep " + std::to_string(index++), std::move(b), cached, step.source,
                                    family, kernel.config),
                      step.shape, step.after};
    ready_function(loaded.function, loaded.shape, device);
    kernel.steps.push_back(loaded);
  }
}

CUfunction Runtime::Impl::load_function(const std::string& key, CachedBinary b, bool cached,
                                        const KernelSource& source, const Family& family,
                                        const Config& config) {
  driver::make_current(context);
  std::unique_ptr<driver::Module> module;
  try {
    module = std::make_unique<driver::Module>(b.cubin.data());
  } catch (const CudaError&) {
    // A cached image the driver refuses (built by a newer toolkit than this driver supports, or damaged in a way
    // its checksum could not see) is compiled again here; a fresh image that fails is the error.
    if (!cached) throw;
    b = binary_of(source, family, config, true);
    module = std::make_unique<driver::Module>(b.cubin.data());
  }
  const CUfunction function = module->function(b.lowered_name);
  std::unique_lock lock(mutex_);
  // A module loaded twice (two threads raced to the same kernel) is kept too: the function handed out lives
  // in it.
  auto [it, inserted] = modules_.try_emplace(key, std::move(module));
  if (!inserted) retired_modules_.push_back(std::move(module));
  return function;
}

bool stream_capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = driver::api().cuStreamIsCapturing(stream, &status);
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) return true;  // the legacy stream while another stream captures
  driver::check(r, "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;  // an invalidated capture is still one: leave it alone
}

void refuse_in_capture(const std::string& op, const std::string& signature, const std::string& what) {
  throw InvalidArgument(op + " " + signature + " was called inside a CUDA graph capture before it was warmed up: it " +
                        "would " + what + ", which a capture forbids. Run the op once with the same shapes, dtypes " +
                        "and options before capturing (nothing was enqueued; the capture is still valid)");
}

void ready_function(CUfunction function, LaunchShape& shape, const DeviceInfo& device) {
  auto opt_in = [&] {
    if (shape.shared_bytes > 48 * 1024)
      JITUNE_CU_CHECK(cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(shape.shared_bytes)));
  };
  opt_in();  // before any occupancy query: without it a block over 48 KiB counts as not fitting at all
  if (shape.spread && shape.grid.volume() <= static_cast<std::uint64_t>(std::max(device.sm_count, 1))) {
    int per_sm = 0, static_bytes = 0;
    JITUNE_CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, function, static_cast<int>(shape.block.volume()), shape.shared_bytes));
    JITUNE_CU_CHECK(cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function));
    // Past half the SM's shared memory (less the static part) two blocks cannot share an SM; within what a
    // block may opt into, else the occupancy stays.
    const long long half = device.max_shared_per_sm / 2 - static_bytes + 1;
    if (per_sm > 1 && half > shape.shared_bytes && half + static_bytes <= device.max_shared_per_block_optin) {
      shape.shared_bytes = static_cast<unsigned>(half);
      opt_in();
    }
  }
  if (shape.balance_units == 0 && !shape.cooperative) return;
  int per_sm = 0;
  JITUNE_CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, function, static_cast<int>(shape.block.volume()), shape.shared_bytes));
  if (shape.cooperative) {
    if (per_sm < 1)
      throw Error("jitune internal error: a cooperative kernel of " + std::to_string(shape.block.volume()) +
                  " threads and " + std::to_string(shape.shared_bytes) +
                  " bytes of shared memory cannot be resident on an SM (the family's check should refuse it)");
    shape.grid.x = static_cast<unsigned>(std::clamp<std::uint64_t>(
        shape.grid.x, 1, std::uint64_t(per_sm) * std::uint64_t(std::max(device.sm_count, 1))));
    return;
  }
  const std::uint64_t resident =
      std::uint64_t(std::max(per_sm, 1)) * std::uint64_t(std::max(device.sm_count, 1));
  const std::uint64_t per_block = (shape.balance_units + resident - 1) / resident;
  shape.grid.x = static_cast<unsigned>(
      std::min<std::uint64_t>((shape.balance_units + per_block - 1) / per_block, 0x7fffffff));
}

namespace {
// JITUNE_NO_PROGRAMMATIC_LAUNCH=1 launches every kernel in stream order (the kernels' griddepcontrol.wait is then a
// no-op): the same build with and without overlapped launches, for a side-by-side measurement or a tool that
// mishandles programmatic launches.
bool programmatic_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("JITUNE_NO_PROGRAMMATIC_LAUNCH");
    return v == nullptr || *v == '\0' || std::string_view(v) == "0";
  }();
  return allowed;
}
}  // namespace

CUresult launch_kernel(CUfunction function, const LaunchShape& shape, CUstream stream, void** args) {
  const driver::Api& api = driver::api();
  const bool programmatic = shape.programmatic && programmatic_allowed();
  if (!programmatic && !shape.cooperative)
    return api.cuLaunchKernel(function, shape.grid.x, shape.grid.y, shape.grid.z, shape.block.x,
                              shape.block.y, shape.block.z, shape.shared_bytes, stream, args, nullptr);
  CUlaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (programmatic) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[count++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (shape.cooperative) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attributes[count++].value.cooperative = 1;
  }
  CUlaunchConfig config{};
  config.gridDimX = shape.grid.x;
  config.gridDimY = shape.grid.y;
  config.gridDimZ = shape.grid.z;
  config.blockDimX = shape.block.x;
  config.blockDimY = shape.block.y;
  config.blockDimZ = shape.block.z;
  config.sharedMemBytes = shape.shared_bytes;
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return api.cuLaunchKernelEx(&config, function, args, nullptr);
}

void Runtime::Impl::launch(const Kernel& k, KernelArgs& args, CUstream stream) {
  driver::make_current(context);
  const CUresult r = launch_kernel(k.function, k.shape, stream, args.pointers());
  if (r != CUDA_SUCCESS)
    throw CudaError("cuLaunchKernel (config " + k.config.text() + ") failed: " + driver::error_text(r), r);
}

CallLaunches::CallLaunches(const Family& family, const Problem& problem, const Kernel& kernel,
                           const Bindings& bindings)
    : step_args_(kernel.steps.size()) {
  family.kernel_args(problem, kernel.config, bindings, main_args_);
  for (std::size_t i = 0; i < kernel.steps.size(); ++i)
    family.step_args(problem, kernel.config, i, bindings, step_args_[i]);
  launches_.reserve(kernel.steps.size() + 1);
  auto add_steps = [&](bool after) {
    for (std::size_t i = 0; i < kernel.steps.size(); ++i)
      if (kernel.steps[i].after == after)
        launches_.push_back({kernel.steps[i].function, &kernel.steps[i].shape, step_args_[i].pointers()});
  };
  add_steps(false);
  launches_.push_back({kernel.function, &kernel.shape, main_args_.pointers()});
  add_steps(true);
}

void Runtime::Impl::launch_call(const Family& family, const Problem& problem, const Kernel& k,
                                const Bindings& bindings, CUstream stream) {
  const CallLaunches call(family, problem, k, bindings);
  driver::make_current(context);
  const std::span<const CallLaunch> launches = call.launches();
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const CUresult r = launch_kernel(launches[i].function, *launches[i].shape, stream, launches[i].args);
    if (r != CUDA_SUCCESS)
      throw CudaError("cuLaunchKernel (launch " + std::to_string(i + 1) + " of " +
                          std::to_string(launches.size()) + ", config " + k.config.text() +
                          ") failed: " + driver::error_text(r),
                      r);
  }
}

void Runtime::Impl::check_device_range(const void* ptr, std::size_t bytes, const std::string& what) const {
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED};
  unsigned int memory_type = 0;
  int ordinal = -1;
  CUdeviceptr start = 0;
  std::size_t size = 0;
  unsigned int managed = 0;
  void* data[] = {&memory_type, &ordinal, &start, &size, &managed};
  const CUresult r = driver::api().cuPointerGetAttributes(5, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
  char where[32];
  std::snprintf(where, sizeof where, "%p", ptr);
  if (r != CUDA_SUCCESS || (memory_type != CU_MEMORYTYPE_DEVICE && !managed))
    throw InvalidArgument(what + " (" + where +
                          ") is not device memory known to CUDA (a host pointer?); pass memory "
                          "from cudaMalloc / cuMemAlloc / a framework's CUDA tensor");
  if (!managed && ordinal != device.ordinal)
    throw InvalidArgument(what + " (" + where + ") lives on CUDA device " + std::to_string(ordinal) +
                          " but this runtime launches on device " + std::to_string(device.ordinal) +
                          "; create the Runtime for that device (RuntimeOptions::device) or copy the data");
  const auto begin = reinterpret_cast<CUdeviceptr>(ptr);
  if (start != 0 && size != 0 && (begin < start || begin - start + bytes > size))
    throw InvalidArgument(what + " (" + where + ") needs " + std::to_string(bytes) +
                          " bytes but its allocation " + "ends " + std::to_string(start + size - begin) +
                          " bytes after it; check the element count");
}
}  // namespace jitune
