// The one dispatch every op goes through: the call-site key (family + the call's raw values), the call site's
// problem, buffer specs and decision (made once), the pointer check (once per pointer set), the decision of the
// pointers' alignment class where the family tunes classes apart, the kernel variant the pointers allow, the
// launch preparation (workspace, zeroed outputs) and the launch. A warm call is one hash lookup under a shared
// lock, a few comparisons, and cuLaunchKernel.
#include "runtime/dispatch.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>

#include "runtime/index_check.hpp"

namespace jitune {
namespace {

// The call-site key: the family's address, the key values' bytes, then the text. Built on the stack for the usual
// call (no heap allocation on the warm path).
class CallKey {
 public:
  CallKey(const Family& family, const CallArgs& args) {
    const auto values = args.values();
    const std::size_t size = sizeof(const Family*) + values.size_bytes() + args.text().size();
    char* out = size <= sizeof(inline_) ? inline_ : (heap_.resize(size), heap_.data());
    const Family* f = &family;
    std::memcpy(out, &f, sizeof f);
    if (!values.empty()) std::memcpy(out + sizeof f, values.data(), values.size_bytes());
    if (!args.text().empty()) std::memcpy(out + sizeof f + values.size_bytes(), args.text().data(), args.text().size());
    view_ = {out, size};
  }
  CallKey(const CallKey&) = delete;
  CallKey& operator=(const CallKey&) = delete;
  std::string_view view() const noexcept { return view_; }

 private:
  char inline_[384];
  std::string heap_;
  std::string_view view_;
};

std::uint64_t hash_pointers(std::span<const void* const> pointers) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const void* p : pointers) h = (h ^ reinterpret_cast<std::uintptr_t>(p)) * 0x100000001b3ull;
  return h | 1;  // never 0, the "nothing checked yet" value
}

std::string quoted(const BufferSpec& spec) { return spec.name; }

std::atomic<std::uint64_t> next_site_id{1};

// The last few launches of this thread: for the same call site, pointers and scalars, the kernel and its
// arguments are the same, so a warm call skips variant selection and Family::kernel_args (a pure function of
// problem, config and bindings). Launches that use a workspace are never remembered (its address changes).
struct LaunchMemo {
  struct Entry {
    std::uint64_t site = 0, pointers = 0, scalars = 0;
    const Kernel* kernel = nullptr;
    KernelArgs args;
  };
  static constexpr std::size_t kEntries = 4;
  Entry entries[kEntries];
  std::size_t next = 0;

  Entry* find(std::uint64_t site, std::uint64_t pointers, std::uint64_t scalars) noexcept {
    for (Entry& e : entries)
      if (e.site == site && e.pointers == pointers && e.scalars == scalars) return &e;
    return nullptr;
  }
  Entry& slot() noexcept { return entries[next++ % kEntries]; }
};

LaunchMemo& launch_memo() {
  thread_local LaunchMemo memo;
  return memo;
}

std::uint64_t hash_scalars(std::span<const double> scalars) noexcept {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (double v : scalars) h = (h ^ std::bit_cast<std::uint64_t>(v)) * 0x100000001b3ull;
  return h;
}

bool writes(const BufferSpec& spec) noexcept { return spec.role != BufferRole::kIn; }

// A zeroed range of a workspace in stream order: allocated (and partly cleared) on the stream, freed there after
// the kernel, so concurrent calls on different streams never share one.
class StreamWorkspace {
 public:
  /// From `pool`, or the device's default pool when it is null.
  StreamWorkspace(const LaunchPrep& prep, CUstream stream, CUmemoryPool pool) : stream_(stream) {
    if (prep.workspace_bytes == 0) return;
    if (pool)
      JITUNE_CU_CHECK(cuMemAllocFromPoolAsync(&ptr_, prep.workspace_bytes, pool, stream));
    else
      JITUNE_CU_CHECK(cuMemAllocAsync(&ptr_, prep.workspace_bytes, stream));
    if (prep.zero_end > prep.zero_begin) {
      const CUresult r =
          driver::api().cuMemsetD8Async(ptr_ + prep.zero_begin, 0, prep.zero_end - prep.zero_begin, stream);
      if (r != CUDA_SUCCESS) {
        driver::api().cuMemFreeAsync(ptr_, stream);
        driver::check(r, "cuMemsetD8Async (workspace)");
      }
    }
  }
  ~StreamWorkspace() {
    if (ptr_) driver::api().cuMemFreeAsync(ptr_, stream_);  // never throws; the memory returns to the pool
  }
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;
  void* data() const noexcept { return reinterpret_cast<void*>(ptr_); }

 private:
  CUdeviceptr ptr_ = 0;
  CUstream stream_;
};

// The pool for a stream-ordered workspace on `stream`: jitune's own (created on first use, keeping
// kPoolKeepBytes reserved), or null for the default pool inside a capture or where the driver refuses a pool.
// The context must be current.
CUmemoryPool workspace_pool(Runtime::Impl& impl, CUstream stream) {
  if (stream_capturing(stream)) return nullptr;
  std::lock_guard lock(impl.scratch_mutex);
  if (!impl.workspace_pool_tried) {
    impl.workspace_pool_tried = true;
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = impl.device.ordinal;
    CUmemoryPool pool = nullptr;
    if (driver::api().cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS) {
      cuuint64_t keep = Runtime::Impl::kPoolKeepBytes;
      if (driver::api().cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS)
        impl.workspace_pool = pool;
      else
        driver::api().cuMemPoolDestroy(pool);
    }
  }
  return impl.workspace_pool;
}

// The workspace kept for `stream` when prep allows one (else nullptr: take a StreamWorkspace). The first launch
// on a stream allocates it and clears its zeroed range on the stream; the kernel leaves that range zero again
// when it finishes, and the stream runs the next launch after it, so later launches need no memset. Not for a
// capturing stream (a graph may replay on any stream, beside direct calls), nor the per-thread default stream
// (one handle, a stream per thread), nor past kMaxScratches workspaces or kMaxScratchTotal bytes; a stream handle is only reused by the
// driver after its destroyed stream's work is done. The context must be current.
void* stream_scratch(Runtime::Impl& impl, const LaunchPrep& prep, CUstream stream) {
  if (!prep.rezeroed_by_kernel || prep.workspace_bytes > Runtime::Impl::kMaxScratchBytes ||
      stream == CU_STREAM_PER_THREAD || stream_capturing(stream))
    return nullptr;
  std::lock_guard lock(impl.scratch_mutex);
  for (const Runtime::Impl::Scratch& s : impl.scratches)
    if (s.stream == stream && s.bytes == prep.workspace_bytes && s.zero_begin == prep.zero_begin &&
        s.zero_end == prep.zero_end)
      return reinterpret_cast<void*>(s.ptr);
  if (impl.scratches.size() >= Runtime::Impl::kMaxScratches ||
      impl.scratch_total + prep.workspace_bytes > Runtime::Impl::kMaxScratchTotal)
    return nullptr;
  CUdeviceptr ptr = 0;
  // Relaxed for this thread: a global-mode capture in another thread neither refuses this allocation nor is
  // invalidated by it.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  driver::api().cuThreadExchangeStreamCaptureMode(&mode);
  const CUresult allocated = driver::api().cuMemAlloc(&ptr, prep.workspace_bytes);
  driver::api().cuThreadExchangeStreamCaptureMode(&mode);
  if (allocated != CUDA_SUCCESS) return nullptr;  // the usual stream-ordered workspace instead
  const CUresult r = driver::api().cuMemsetD8Async(ptr + prep.zero_begin, 0, prep.zero_end - prep.zero_begin, stream);
  if (r != CUDA_SUCCESS) {
    driver::api().cuMemFree(ptr);
    driver::check(r, "cuMemsetD8Async (stream scratch)");
  }
  impl.scratches.push_back({stream, prep.workspace_bytes, prep.zero_begin, prep.zero_end, ptr});
  impl.scratch_total += prep.workspace_bytes;
  return reinterpret_cast<void*>(ptr);
}

}  // namespace

CallSite& CallSites::site(Runtime::Impl& impl, const Family& family, const CallArgs& args, CUstream stream) {
  const CallKey key(family, args);
  {
    std::shared_lock lock(mutex_);
    if (auto it = sites_.find(key.view()); it != sites_.end()) return *it->second;
  }
  auto site = std::make_unique<CallSite>();
  site->id = next_site_id.fetch_add(1, std::memory_order_relaxed);
  site->family = &family;
  site->problem = family.problem_from_call(args);  // validates the call; throws before anything is remembered
  site->specs = family.buffers(*site->problem);
  site->op = std::string(family.op_name(*site->problem));
  site->shortcut = family.shortcut(*site->problem);
  for (const BufferSpec& spec : site->specs) {
    site->stride_alignment.push_back(spec.stride_alignment());
    site->extent.push_back(spec.extent_bytes());
  }
  if (site->specs.size() > kMaxBuffers)
    throw Error("jitune internal error: " + site->op + " declares more than 16 buffers");
  if (site->shortcut.kind == Shortcut::Kind::kNone) {
    driver::make_current(impl.context);
    site->decision = &impl.decide(family, *site->problem, stream_capturing(stream));
  }
  std::unique_lock lock(mutex_);
  return *sites_.try_emplace(std::string(key.view()), std::move(site)).first->second;
}

void CallSites::clear() {
  std::unique_lock lock(mutex_);
  for (auto& [key, site] : sites_) retired_.push_back(std::move(site));
  sites_.clear();
}

void check_buffers(const Runtime::Impl& impl, const CallSite& site, std::span<const void* const> pointers) {
  const std::size_t n = site.specs.size();
  for (std::size_t i = 0; i < n; ++i) {
    const BufferSpec& spec = site.specs[i];
    const auto address = reinterpret_cast<std::uintptr_t>(pointers[i]);
    if (site.extent[i] == 0) continue;  // an empty buffer (an absent optional one too) may be anything
    const std::size_t es = dtype_size(spec.dtype);
    if (address == 0)
      throw InvalidArgument(site.op + ": " + quoted(spec) + " pointer is null; pass a device pointer to " +
                            std::string(dtype_name(spec.dtype)) + " elements");
    if (address % es != 0)
      throw InvalidArgument(site.op + ": " + quoted(spec) + " pointer is not aligned to its " + std::to_string(es) +
                            "-byte " + std::string(dtype_name(spec.dtype)) + " elements");
  }
  // An output must not share memory with another buffer (except an in-place output with an input's very range).
  for (std::size_t i = 0; i < n; ++i) {
    if (!writes(site.specs[i]) || site.extent[i] == 0 || !pointers[i]) continue;
    const auto a = reinterpret_cast<std::uintptr_t>(pointers[i]);
    for (std::size_t j = 0; j < n; ++j) {
      if (j == i || site.extent[j] == 0 || !pointers[j]) continue;
      const auto b = reinterpret_cast<std::uintptr_t>(pointers[j]);
      if (a >= b + site.extent[j] || b >= a + site.extent[i]) continue;
      const bool same_range = a == b && site.extent[i] == site.extent[j];
      if (same_range && site.specs[i].in_place && !writes(site.specs[j])) continue;
      throw InvalidArgument(site.op + ": " + quoted(site.specs[i]) + " overlaps " + quoted(site.specs[j]) +
                            (site.specs[i].in_place ? " without being the very same memory" : "") +
                            "; give the output a buffer of its own" +
                            (site.specs[i].in_place ? " or exactly the input's" : ""));
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (site.extent[i] != 0 && pointers[i])
      impl.check_device_range(pointers[i], site.extent[i], site.op + " " + quoted(site.specs[i]));
}

// What serves a call: the site's problem and decision, or a misaligned class's own (AlignedCase).
struct Served {
  const Problem* problem;
  const Decision* decision;
  std::atomic<const Kernel*>* kernels;
};

// The site itself while every pointer is 16-byte aligned (or the family serves any class with one decision);
// otherwise the refined problem of these alignment classes, decided on its own the first time the class is seen.
Served served(Runtime::Impl& impl, CallSite& site, std::span<const std::uint8_t> alignment, CUstream stream) {
  Served own{site.problem.get(), site.decision, site.kernels};
  std::uint64_t key = 0;
  bool full = true;
  for (std::size_t i = 0; i < alignment.size(); ++i) {
    full = full && (alignment[i] >= 16 || site.extent[i] == 0);
    key |= static_cast<std::uint64_t>(std::countr_zero(static_cast<unsigned>(alignment[i] | 32u))) << (3 * i);
  }
  if (full) return own;
  auto from = [&](AlignedCase& c) {
    return c.problem ? Served{c.problem.get(), c.decision, c.kernels} : own;
  };
  {
    std::shared_lock lock(site.aligned_mutex);
    for (const auto& c : site.aligned)
      if (c->key == key) return from(*c);
  }
  auto c = std::make_unique<AlignedCase>();
  c->key = key;
  c->problem = site.family->with_alignment(*site.problem, alignment);
  if (c->problem) {
    driver::make_current(impl.context);
    c->decision = &impl.decide(*site.family, *c->problem, stream_capturing(stream));
  }
  std::unique_lock lock(site.aligned_mutex);
  for (const auto& existing : site.aligned)  // another thread may have added the class meanwhile
    if (existing->key == key) return from(*existing);
  site.aligned.push_back(std::move(c));
  return from(*site.aligned.back());
}

// The loaded kernel of the variant these bindings select, loading it on the first call with that variant.
const Kernel& site_kernel(Runtime::Impl& impl, const CallSite& site, const Served& served, const Bindings& bindings,
                          CUstream stream) {
  const Family& family = *site.family;
  const Problem& problem = *served.problem;
  const Config& tuned = served.decision->config;
  const int slot = family.variant(problem, tuned, bindings);
  if (const Kernel* kernel = served.kernels[slot].load(std::memory_order_acquire)) return *kernel;
  // The decided config must be legal; its variants are the family's own narrowing for these pointers.
  if (const std::string why = family.validate(problem, tuned, impl.device); !why.empty())
    throw InvalidArgument(site.op + " " + problem.signature() + ": no kernel configuration fits this call on " +
                          impl.device.name + " (config " + tuned.text() + ": " + why + ")");
  driver::make_current(impl.context);
  const Kernel* kernel = &impl.kernel(family, problem, family.variant_config(problem, tuned, slot, impl.device),
                                      stream_capturing(stream));
  served.kernels[slot].store(kernel, std::memory_order_release);
  return *kernel;
}

// The opt-in index check: every index buffer read back and scanned on the host (never inside a graph capture,
// where the synchronisation it needs is forbidden).
void check_index_buffers(const Runtime::Impl& impl, const CallSite& site, std::span<const void* const> buffers,
                         CUstream stream) {
  bool asked = false;  // the driver is asked about the capture once, and only when there is an index to check
  for (std::size_t i = 0; i < site.specs.size(); ++i) {
    if (site.specs[i].index_bound < 0 || site.extent[i] == 0) continue;
    if (!asked) {
      driver::make_current(impl.context);
      if (stream_capturing(stream))
        throw InvalidArgument(site.op + ": check_indices reads the indices back to the host, which synchronizes "
                              "the stream, and a CUDA graph capture forbids that; check the indices before "
                              "capturing and turn check_indices off inside the capture (nothing was enqueued)");
      asked = true;
    }
    check_indices_on_host(site.op, site.specs[i], buffers[i], stream);
  }
}

// Clears the outputs a launch accumulates into (Family::prep's zero_buffers), in stream order.
void zero_outputs(Runtime::Impl& impl, const CallSite& site, const Kernel& kernel,
                  std::span<const void* const> buffers, CUstream stream) {
  driver::make_current(impl.context);
  for (std::uint32_t mask = kernel.prep.zero_buffers; mask != 0; mask &= mask - 1) {
    const auto i = static_cast<std::size_t>(std::countr_zero(mask));
    JITUNE_CU_CHECK(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(buffers[i]), 0, site.extent[i], stream));
  }
}

void call(Runtime& runtime, std::string_view family_name, const CallArgs& args, std::span<const void* const> buffers,
          Stream stream, const CallOptions& options) {
  Runtime::Impl& impl = internal::impl(runtime);
  const Family& family = jitune::family(family_name);
  const auto cu_stream = reinterpret_cast<CUstream>(stream);
  CallSite& site = impl.call_sites->site(impl, family, args, cu_stream);
  const std::size_t n = site.specs.size();
  // Trailing optional buffers this problem does not use may be left out (a conv2d call written before its
  // residual buffer existed): they are passed on as null.
  std::array<const void*, kMaxBuffers> padded;  // filled only on that path: the warm path pays nothing for it
  if (buffers.size() < n) {
    bool absent = true;
    for (std::size_t i = buffers.size(); i < n; ++i) absent = absent && site.specs[i].optional && site.extent[i] == 0;
    if (absent) {
      std::fill(std::copy(buffers.begin(), buffers.end(), padded.begin()), padded.begin() + n, nullptr);
      buffers = std::span<const void* const>(padded.data(), n);
    }
  }
  if (buffers.size() != n) {
    std::string names;
    for (const BufferSpec& spec : site.specs) names += (names.empty() ? "" : ", ") + spec.name;
    throw InvalidArgument(site.op + ": the call takes " + std::to_string(n) + " buffer(s) (" + names + ", in that " +
                          "order) but " + std::to_string(buffers.size()) + " were given");
  }
  // Pointer checks through the driver only when this call site's pointers change: a loop over the same buffers
  // keeps the warm path a lookup plus cuLaunchKernel.
  const std::uint64_t pointer_hash = hash_pointers(buffers);
  if (site.checked_pointers.load(std::memory_order_relaxed) != pointer_hash) {
    check_buffers(impl, site, buffers);
    site.checked_pointers.store(pointer_hash, std::memory_order_relaxed);
  }
  if (options.check_indices) check_index_buffers(impl, site, buffers, cu_stream);
  const Shortcut& shortcut = site.shortcut;
  if (shortcut.kind != Shortcut::Kind::kNone) {
    if (shortcut.kind == Shortcut::Kind::kNothing) return;
    driver::make_current(impl.context);
    const auto to = reinterpret_cast<CUdeviceptr>(buffers[static_cast<std::size_t>(shortcut.to)]);
    const std::size_t bytes = site.extent[static_cast<std::size_t>(shortcut.to)];
    if (shortcut.kind == Shortcut::Kind::kZero)
      JITUNE_CU_CHECK(cuMemsetD8Async(to, 0, bytes, cu_stream));
    else
      JITUNE_CU_CHECK(cuMemcpyDtoDAsync(
          to, reinterpret_cast<CUdeviceptr>(buffers[static_cast<std::size_t>(shortcut.from)]), bytes, cu_stream));
    return;
  }
  const std::uint64_t scalar_hash = hash_scalars(args.scalars());
  LaunchMemo& memo = launch_memo();
  if (LaunchMemo::Entry* hit = memo.find(site.id, pointer_hash, scalar_hash)) {
    if (hit->kernel->prep.zero_buffers) zero_outputs(impl, site, *hit->kernel, buffers, cu_stream);
    impl.launch(*hit->kernel, hit->args, cu_stream);
    return;
  }
  std::uint8_t alignment[kMaxBuffers];
  for (std::size_t i = 0; i < n; ++i)
    alignment[i] = buffers[i] ? alignment_class(buffers[i], site.stride_alignment[i]) : 0;
  Bindings bindings{buffers, std::span<const std::uint8_t>(alignment, n), nullptr, args.scalars()};
  const Served serve = served(impl, site, bindings.alignment, cu_stream);
  const Problem& problem = *serve.problem;
  const Kernel& kernel = site_kernel(impl, site, serve, bindings, cu_stream);
  if (kernel.prep.zero_buffers) zero_outputs(impl, site, kernel, buffers, cu_stream);
  if (kernel.prep.workspace_bytes > 0) {
    driver::make_current(impl.context);
    if (void* scratch = stream_scratch(impl, kernel.prep, cu_stream)) {
      bindings.workspace = scratch;
      impl.launch_call(family, problem, kernel, bindings, cu_stream);
      return;
    }
    const StreamWorkspace workspace(kernel.prep, cu_stream, workspace_pool(impl, cu_stream));
    bindings.workspace = workspace.data();
    impl.launch_call(family, problem, kernel, bindings, cu_stream);
    return;
  }
  // (A call of several kernels always has a workspace, so it never reaches the memo: Runtime::Impl::kernel.)
  LaunchMemo::Entry& entry = memo.slot();
  entry.site = 0;  // invalid until complete: kernel_args may throw
  entry.args.clear();
  family.kernel_args(problem, kernel.config, bindings, entry.args);
  entry.kernel = &kernel;
  entry.pointers = pointer_hash;
  entry.scalars = scalar_hash;
  entry.site = site.id;
  impl.launch(kernel, entry.args, cu_stream);
}

std::string call_signature(std::string_view family_name, const CallArgs& args) {
  return family(family_name).problem_from_call(args)->signature();
}

}  // namespace jitune
