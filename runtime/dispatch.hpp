// The generic dispatch's memory of call sites: per (family, call values) the problem, its buffer specs, what
// replaces the kernel (if anything), the decision, and up to 8 loaded kernel variants. Internal to the runtime.
#pragma once

#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/runtime_impl.hpp"

namespace jitune {

/// Most buffers one call takes (elementwise: 8 inputs and the output).
inline constexpr std::size_t kMaxBuffers = 16;

/// A misaligned class of a call site whose family tunes alignment classes apart (Family::with_alignment): the
/// refined problem, its own decision and kernel variants. problem is null when the family serves the class with
/// the site's own decision (remembered so the question is asked once per class).
struct AlignedCase {
  std::uint64_t key = 0;                       ///< The classes, 3 bits each (log2).
  std::unique_ptr<Problem> problem;
  const Decision* decision = nullptr;
  std::atomic<const Kernel*> kernels[8] = {};
};

/// A remembered call site. Never freed while the Runtime lives (reload() retires it), so a pointer handed to a
/// concurrent caller stays valid.
struct CallSite {
  std::uint64_t id = 0;                        ///< Unique in the process (the thread-local launch memo's key).
  const Family* family = nullptr;
  std::unique_ptr<Problem> problem;
  std::vector<BufferSpec> specs;
  std::vector<std::uint8_t> stride_alignment;  ///< Per spec, BufferSpec::stride_alignment().
  std::vector<std::uint64_t> extent;           ///< Per spec, BufferSpec::extent_bytes().
  std::string op;                              ///< The public op's name, for messages.
  Shortcut shortcut;
  const Decision* decision = nullptr;          ///< nullptr when a shortcut replaces the kernel.
  std::atomic<const Kernel*> kernels[8] = {};  ///< Index: Family::variant's slot.
  std::atomic<std::uint64_t> checked_pointers{0};  ///< Hash of the last pointer set that passed the checks.
  std::shared_mutex aligned_mutex;
  std::vector<std::unique_ptr<AlignedCase>> aligned;  ///< Misaligned classes seen (never freed, like the site).
};

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

/// Call sites keyed by the family and the call's raw values. Thread-safe.
class CallSites {
 public:
  /// The site of this call; on a miss the family builds the problem (validating the call once) and the
  /// dispatcher decides its config (never tuning while `stream` is being captured into a CUDA graph).
  CallSite& site(Runtime::Impl& impl, const Family& family, const CallArgs& args, CUstream stream);
  /// Forgets every site (reload()); sites in use stay valid.
  void clear();

 private:
  std::shared_mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<CallSite>, StringHash, std::equal_to<>> sites_;
  std::vector<std::unique_ptr<CallSite>> retired_;
};

/// The one pointer check: for every buffer with a non-zero extent, not null (unless optional), aligned to its
/// element, inside one device allocation of this runtime's device, and no output overlapping another buffer
/// (an in-place output may be exactly an input). Throws InvalidArgument naming the op and the buffer.
void check_buffers(const Runtime::Impl& impl, const CallSite& site, std::span<const void* const> pointers);

}  // namespace jitune
