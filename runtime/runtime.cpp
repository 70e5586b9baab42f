// Runtime: device and primary context, caches, and the dispatcher (user store -> shipped stores -> nearest tuned
// problem -> same architecture -> heuristic).
#include "runtime/runtime_impl.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "runtime/dispatch.hpp"
#include "templates/sources.hpp"

#ifndef JITUNE_SHIPPED_DIRS
#define JITUNE_SHIPPED_DIRS ""
#endif

namespace jitune {

std::string_view match_level_name(MatchLevel level) noexcept {
  switch (level) {
    case MatchLevel::kExact: return "exact";
    case MatchLevel::kNearestProblem: return "nearest_problem";
    case MatchLevel::kSameArchitecture: return "same_architecture";
    case MatchLevel::kHeuristic: return "heuristic";
  }
  return "unknown";
}

int device_count() noexcept {
  try {
    int n = 0;
    if (driver::api().cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
    return n;
  } catch (...) {
    return 0;
  }
}

std::string device_unavailable_reason() {
  if (!driver::load_error().empty()) return driver::load_error();
  int n = 0;
  CUresult r = driver::api().cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) return "cuDeviceGetCount failed: " + driver::error_text(r);
  if (n == 0) return "the driver reports no CUDA device";
  return {};
}

DeviceInfo query_device(CUdevice dev) {
  const auto& a = driver::api();
  DeviceInfo d;
  char name[256] = {};
  JITUNE_CU_CHECK(cuDeviceGetName(name, sizeof name, dev));
  d.name = name;
  auto attr = [&](CUdevice_attribute what) {
    int v = 0;
    driver::check(a.cuDeviceGetAttribute(&v, what, dev), "cuDeviceGetAttribute");
    return v;
  };
  d.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  d.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  d.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  d.max_threads_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  d.max_shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  d.max_shared_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  d.max_shared_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  d.registers_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  d.registers_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  d.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  std::size_t total = 0;
  JITUNE_CU_CHECK(cuDeviceTotalMem(&total, dev));
  d.global_memory_bytes = static_cast<std::int64_t>(total);
  JITUNE_CU_CHECK(cuDriverGetVersion(&d.driver_version));
  return d;
}

std::filesystem::path default_cache_dir() {
  if (const char* v = std::getenv("JITUNE_CACHE_DIR"); v && *v) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return std::filesystem::path(v) / "jitune";
  if (const char* v = std::getenv("HOME"); v && *v) return std::filesystem::path(v) / ".cache" / "jitune";
  return std::filesystem::temp_directory_path() / "jitune";
}

std::vector<std::filesystem::path> builtin_shipped_caches() {
  std::vector<std::filesystem::path> out;
  auto add_list = [&](std::string_view list) {
    while (!list.empty()) {
      std::size_t colon = list.find(':');
      std::filesystem::path p(std::string(list.substr(0, colon)));
      std::error_code ec;
      if (!p.empty() && std::filesystem::is_directory(p, ec)) {
        std::vector<std::filesystem::path> files;
        for (const auto& entry : std::filesystem::directory_iterator(p, ec))
          if (entry.path().extension() == ".sqlite") files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        out.insert(out.end(), files.begin(), files.end());
      } else if (!p.empty() && std::filesystem::exists(p, ec)) {
        out.push_back(p);
      }
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  };
  if (const char* v = std::getenv("JITUNE_SHIPPED_CACHES")) add_list(v);
  add_list(JITUNE_SHIPPED_DIRS);
  return out;
}

std::unique_ptr<cache::Store> open_user_store(const std::filesystem::path& path, std::vector<std::string>& notes) {
  try {
    return std::make_unique<cache::Store>(path, cache::OpenMode::kReadWrite);
  } catch (const StoreError& e) {
    notes.push_back(e.what());
  }
  // A cache that cannot be written is still worth reading; one that cannot be read is left alone.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    notes.push_back("running without a user cache: tuned results will not be kept (set JITUNE_CACHE_DIR to a "
                    "writable folder)");
    return nullptr;
  }
  try {
    auto store = std::make_unique<cache::Store>(path, cache::OpenMode::kReadOnly);
    notes.push_back("using the user cache " + path.string() + " read-only: lookups work, new results are not stored");
    return store;
  } catch (const StoreError&) {
    notes.push_back("running without the user cache " + path.string() +
                    " (left untouched); lookups use the shipped caches and heuristics");
    return nullptr;
  }
}

Runtime::Impl::Impl(Runtime& owner, RuntimeOptions opts)
    : self(owner),
      options(std::move(opts)),
      binaries(options.disk_binary_cache
                   ? (options.binary_cache_dir.empty()
                          ? (options.user_cache.empty() ? default_cache_dir() : options.user_cache.parent_path()) /
                                "kernels"
                          : options.binary_cache_dir)
                   : std::filesystem::path()) {
  const auto& a = driver::api();
  int count = 0;
  JITUNE_CU_CHECK(cuDeviceGetCount(&count));
  if (options.device < 0 || options.device >= count)
    throw NoDevice("CUDA device " + std::to_string(options.device) + " does not exist; " + std::to_string(count) +
                   " device(s) visible (check CUDA_VISIBLE_DEVICES)");
  JITUNE_CU_CHECK(cuDeviceGet(&cu_device, options.device));
  JITUNE_CU_CHECK(cuDevicePrimaryCtxRetain(&context, cu_device));
  (void)a;
  driver::make_current(context);  // as cudaSetDevice would: the caller's CUDA calls on this thread now work too
  device = query_device(cu_device);
  device.ordinal = options.device;

  if (options.user_cache.empty()) options.user_cache = default_cache_dir() / "tuning.sqlite";
  if (options.binary_cache_dir.empty() && options.disk_binary_cache) options.binary_cache_dir = binaries.folder();
  if (options.use_user_cache) user_store = open_user_store(options.user_cache, store_notes);
  std::vector<std::filesystem::path> shipped = options.shipped_caches;
  if (options.use_builtin_shipped_caches)
    for (auto& p : builtin_shipped_caches()) shipped.push_back(p);
  for (const auto& p : shipped) {
    try {
      shipped_stores.push_back(std::make_unique<cache::Store>(p, cache::OpenMode::kReadOnly));
    } catch (const StoreError& e) {
      store_notes.push_back(std::string("shipped cache skipped: ") + e.what());
    }
  }
  if (!options.quiet)
    for (const std::string& note : store_notes) std::fprintf(stderr, "jitune warning: %s\n", note.c_str());
  call_sites = std::make_unique<CallSites>();
}

Runtime::Impl::~Impl() {
  call_sites.reset();
  kernels_.clear();
  modules_.clear();
  if (context) driver::api().cuDevicePrimaryCtxRelease(cu_device);
}

cache::RecordKey record_key(const Family& family, const Problem& problem, const DeviceInfo& device,
                            const std::string& nvrtc_version) {
  return {std::string(family.name()), template_hash(family.template_name()), problem.signature(), device.name,
          device.cc(), device.sm_count, nvrtc_version};
}

cache::RecordKey Runtime::Impl::record_key(const Family& family, const Problem& problem) const {
  return jitune::record_key(family, problem, device, compiler.nvrtc_version());
}

namespace {

double feature_distance(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(d);
}

}  // namespace

Decision Runtime::Impl::lookup(const Family& family, const Problem& problem) const {
  std::vector<const cache::Store*> stores;
  if (user_store) stores.push_back(user_store.get());
  for (const auto& s : shipped_stores) stores.push_back(s.get());
  return lookup_decision(family, problem, device, compiler.nvrtc_version(), stores);
}

Decision lookup_decision(const Family& family, const Problem& problem, const DeviceInfo& device,
                         const std::string& nvrtc_version, const std::vector<const cache::Store*>& stores) {
  Decision d;
  Explanation& x = d.explanation;
  const cache::RecordKey key = record_key(family, problem, device, nvrtc_version);
  x.family = key.family;
  x.signature = key.signature;
  const Config heuristic = family.heuristic(problem, device);
  x.heuristic_config = heuristic.text();

  // A stored config is used only if it is still legal here (the space or the constraints may have changed).
  auto usable = [&](const cache::Record& r, Config& out) {
    try {
      out = Config::parse(r.config);
    } catch (const Error& e) {
      x.notes.push_back("record for " + r.key.signature + " has unreadable config: " + e.what());
      return false;
    }
    std::string why = family.validate(problem, out, device);
    if (!why.empty()) x.notes.push_back("record config " + r.config + " skipped: " + why);
    return why.empty();
  };
  auto take = [&](const cache::Record& r, const cache::Store* s, MatchLevel level, Config c) {
    d.config = std::move(c);
    x.config = d.config.text();
    x.level = level;
    x.source = s->path().string();
    x.matched_signature = r.key.signature;
    x.matched_device = r.key.device_name;
    x.time_us = r.time_us;
    x.default_time_us = r.default_time_us;
  };

  for (const cache::Store* s : stores) {
    try {
      auto r = s->find_exact(key.family, key.template_hash, key.signature, key.device_name, key.cc, key.sm_count,
                             key.nvrtc_version);
      Config c;
      if (r && usable(*r, c)) {
        take(*r, s, MatchLevel::kExact, std::move(c));
        if (r->key.nvrtc_version != key.nvrtc_version)
          x.notes.push_back("tuned with NVRTC " + r->key.nvrtc_version + ", running NVRTC " + key.nvrtc_version +
                            " (jitune cache revalidate re-times it)");
        return d;
      }
    } catch (const Error& e) {
      x.notes.push_back(std::string("lookup in ") + s->path().string() + " failed: " + e.what());
    }
  }
  const std::vector<double> features = problem.features();
  auto nearest = [&](MatchLevel level) {
    double best = std::numeric_limits<double>::infinity();
    std::optional<std::pair<cache::Record, const cache::Store*>> pick;
    Config pick_config;
    for (const cache::Store* s : stores) {
      try {
        auto records = level == MatchLevel::kNearestProblem
                           ? s->find_group(key.family, key.template_hash, problem.group(), key.device_name, key.cc,
                                           key.sm_count)
                           : s->find_same_arch(key.family, key.template_hash, problem.group(), key.cc,
                                               key.device_name);
        for (auto& r : records) {
          const double dist = r.key.signature == key.signature ? -1.0 : feature_distance(features, r.features);
          Config c;
          if (dist < best && usable(r, c)) {
            best = dist;
            pick.emplace(std::move(r), s);
            pick_config = std::move(c);
          }
        }
      } catch (const Error& e) {
        x.notes.push_back(std::string("lookup in ") + s->path().string() + " failed: " + e.what());
      }
    }
    if (pick) take(pick->first, pick->second, level, std::move(pick_config));
    return pick.has_value();
  };
  if (nearest(MatchLevel::kNearestProblem) || nearest(MatchLevel::kSameArchitecture)) return d;
  d.config = heuristic;
  x.config = heuristic.text();
  x.level = MatchLevel::kHeuristic;
  x.source = "heuristic";
  return d;
}

const Decision& Runtime::Impl::decide(const Family& family, const Problem& problem) {
  const std::string map_key = std::string(family.name()) + '\n' + problem.signature();
  {
    std::shared_lock lock(mutex_);
    if (auto it = decisions_.find(map_key); it != decisions_.end()) return *it->second;
  }
  auto decision = std::make_unique<Decision>(lookup(family, problem));
  if (decision->explanation.level != MatchLevel::kExact && options.tuning) {
    std::lock_guard tune_lock(tune_mutex_);
    try {
      if (std::optional<Explanation> tuned = options.tuning->tune(self, family, problem))
        adopt_tuned(family, problem, std::move(*tuned), *decision);
    } catch (const std::exception& e) {
      decision->explanation.notes.push_back(std::string("tuning on first use failed: ") + e.what());
    }
  }
  std::unique_lock lock(mutex_);
  return *decisions_.try_emplace(map_key, std::move(decision)).first->second;
}

void Runtime::Impl::adopt_tuned(const Family& family, const Problem& problem, Explanation tuned,
                                Decision& decision) const {
  Config config;
  try {
    config = Config::parse(tuned.config);
  } catch (const Error& e) {
    decision.explanation.notes.push_back("tuning on first use returned an unreadable config: " +
                                         std::string(e.what()));
    return;
  }
  if (const std::string why = family.validate(problem, config, device); !why.empty()) {
    decision.explanation.notes.push_back("tuning on first use returned config " + tuned.config +
                                         ", which is not legal here: " + why);
    return;
  }
  tuned.notes.insert(tuned.notes.begin(), decision.explanation.notes.begin(), decision.explanation.notes.end());
  decision.config = std::move(config);
  decision.explanation = std::move(tuned);
}

CachedBinary Runtime::Impl::binary(const Family& family, const Problem& problem, const Config& config) {
  const KernelSource src = family.source(problem, config);
  const std::string bkey = compiler.binary_key(src.program, src.name_expression, device.arch());
  if (auto hit = binaries.get(bkey)) return *hit;
  CompiledProgram out = compiler.compile(src.program, {src.name_expression}, device.arch(), false);
  if (!out.ok)
    throw CompileError("NVRTC could not compile " + std::string(family.name()) + " with config " + config.text() +
                           " for " + device.arch() + ":\n" + out.log,
                       std::string(family.name()), config.text(), out.options, out.log);
  CachedBinary b{std::move(out.cubin), out.lowered.at(0)};
  binaries.put(bkey, b);
  return b;
}

const Kernel& Runtime::Impl::kernel(const Family& family, const Problem& problem, const Config& config) {
  const std::string map_key = std::string(family.name()) + '\n' + problem.signature() + '\n' + config.text();
  {
    std::shared_lock lock(mutex_);
    if (auto it = kernels_.find(map_key); it != kernels_.end()) return *it->second;
  }
  CachedBinary b = binary(family, problem, config);
  driver::make_current(context);
  auto module = std::make_unique<driver::Module>(b.cubin.data());
  auto k = std::make_unique<Kernel>();
  k->function = module->function(b.lowered_name);
  k->shape = family.launch_shape(problem, config, device);
  k->config = config;
  k->prep = family.prep(problem, config);
  ready_function(k->function, k->shape, device);
  std::unique_lock lock(mutex_);
  auto [it, inserted] = kernels_.try_emplace(map_key, std::move(k));
  if (inserted) modules_.emplace(map_key, std::move(module));
  return *it->second;
}

void ready_function(CUfunction function, LaunchShape& shape, const DeviceInfo& device) {
  if (shape.shared_bytes > 48 * 1024)
    JITUNE_CU_CHECK(cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(shape.shared_bytes)));
  if (shape.balance_units == 0) return;
  int per_sm = 0;
  JITUNE_CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, function, static_cast<int>(shape.block.volume()), shape.shared_bytes));
  const std::uint64_t resident =
      std::uint64_t(std::max(per_sm, 1)) * std::uint64_t(std::max(device.sm_count, 1));
  const std::uint64_t per_block = (shape.balance_units + resident - 1) / resident;
  shape.grid.x = static_cast<unsigned>(
      std::min<std::uint64_t>((shape.balance_units + per_block - 1) / per_block, 0x7fffffff));
}

CUresult launch_kernel(CUfunction function, const LaunchShape& shape, CUstream stream, void** args) {
  const driver::Api& api = driver::api();
  if (!shape.programmatic)
    return api.cuLaunchKernel(function, shape.grid.x, shape.grid.y, shape.grid.z, shape.block.x,
                              shape.block.y, shape.block.z, shape.shared_bytes, stream, args, nullptr);
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = shape.grid.x;
  config.gridDimY = shape.grid.y;
  config.gridDimZ = shape.grid.z;
  config.blockDimX = shape.block.x;
  config.blockDimY = shape.block.y;
  config.blockDimZ = shape.block.z;
  config.sharedMemBytes = shape.shared_bytes;
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return api.cuLaunchKernelEx(&config, function, args, nullptr);
}

void Runtime::Impl::launch(const Kernel& k, KernelArgs& args, CUstream stream) {
  driver::make_current(context);
  const CUresult r = launch_kernel(k.function, k.shape, stream, args.pointers());
  if (r != CUDA_SUCCESS)
    throw CudaError("cuLaunchKernel (config " + k.config.text() + ") failed: " + driver::error_text(r), r);
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
    throw InvalidArgument(what + " (" + where + ") is not device memory known to CUDA (a host pointer?); pass memory "
                          "from cudaMalloc / cuMemAlloc / a framework's CUDA tensor");
  if (!managed && ordinal != device.ordinal)
    throw InvalidArgument(what + " (" + where + ") lives on CUDA device " + std::to_string(ordinal) +
                          " but this runtime launches on device " + std::to_string(device.ordinal) +
                          "; create the Runtime for that device (RuntimeOptions::device) or copy the data");
  const auto begin = reinterpret_cast<CUdeviceptr>(ptr);
  if (start != 0 && size != 0 && (begin < start || begin - start + bytes > size))
    throw InvalidArgument(what + " (" + where + ") needs " + std::to_string(bytes) + " bytes but its allocation " +
                          "ends " + std::to_string(start + size - begin) + " bytes after it; check the element count");
}

void Runtime::Impl::forget_decisions() {
  call_sites->clear();
  std::unique_lock lock(mutex_);
  // Callers may still hold references to decisions: retire them instead of freeing.
  for (auto& [key, d] : decisions_) retired_decisions_.push_back(std::move(d));
  decisions_.clear();
}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(*this, std::move(options))) {}
Runtime::~Runtime() = default;

const DeviceInfo& Runtime::device() const noexcept { return impl_->device; }
const RuntimeOptions& Runtime::options() const noexcept { return impl_->options; }
const std::vector<std::string>& Runtime::warnings() const noexcept { return impl_->store_notes; }

Explanation Runtime::explain(std::string_view family_name, std::string_view signature) {
  const Family& f = family(family_name);
  auto problem = f.parse_problem(signature);
  Explanation x = impl_->decide(f, *problem).explanation;
  x.notes.insert(x.notes.begin(), impl_->store_notes.begin(), impl_->store_notes.end());
  return x;
}

void Runtime::reload() { impl_->forget_decisions(); }

}  // namespace jitune
