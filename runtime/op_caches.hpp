// Per-op memory of warm calls, keyed by the raw call arguments: a warm call is one hash lookup under a shared lock,
// then cuLaunchKernel. Entries are never freed while the Runtime lives (reload() retires them), so a pointer
// handed to a concurrent caller stays valid.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <jitune/tensor.hpp>

#include "runtime/runtime_impl.hpp"
#include "templates/elementwise/elementwise.hpp"

namespace jitune {

/// A remembered elementwise call site: its problem, decision, and the kernel per vector width (pack 1..16).
struct ElementwiseEntry {
  std::unique_ptr<ew::ElementwiseProblem> problem;
  const Decision* decision = nullptr;
  int tuned_pack = 1;
  std::atomic<const Kernel*> kernels[5] = {};  // index log2(pack)
  std::atomic<std::uint64_t> checked_pointers{0};  // hash of the last pointer set that passed the range check
};

struct ElementwiseKeyView {
  std::string_view expression;
  DType dtype;
  std::int64_t n;
};

struct ElementwiseKey {
  std::string expression;
  DType dtype;
  std::int64_t n;
  operator ElementwiseKeyView() const noexcept { return {expression, dtype, n}; }
};

struct ElementwiseKeyHash {
  using is_transparent = void;
  std::size_t operator()(const ElementwiseKeyView& k) const noexcept {
    return std::hash<std::string_view>{}(k.expression) ^ (static_cast<std::size_t>(k.n) * 0x9e3779b97f4a7c15ull) ^
           static_cast<std::size_t>(k.dtype);
  }
  std::size_t operator()(const ElementwiseKey& k) const noexcept { return (*this)(ElementwiseKeyView(k)); }
};

struct ElementwiseKeyEqual {
  using is_transparent = void;
  static bool eq(const ElementwiseKeyView& a, const ElementwiseKeyView& b) noexcept {
    return a.n == b.n && a.dtype == b.dtype && a.expression == b.expression;
  }
  bool operator()(const ElementwiseKeyView& a, const ElementwiseKeyView& b) const noexcept { return eq(a, b); }
  bool operator()(const ElementwiseKey& a, const ElementwiseKeyView& b) const noexcept { return eq(a, b); }
  bool operator()(const ElementwiseKeyView& a, const ElementwiseKey& b) const noexcept { return eq(a, b); }
  bool operator()(const ElementwiseKey& a, const ElementwiseKey& b) const noexcept { return eq(a, b); }
};

/// A remembered call site of any family: its problem, decision, and up to 8 kernels for variants an op picks by
/// rule at launch time (pointer alignment, say), indexed by the op.
struct OpEntry {
  std::unique_ptr<Problem> problem;
  const Decision* decision = nullptr;
  std::atomic<const Kernel*> kernels[8] = {};
};

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct Runtime::Impl::OpCaches {
  std::shared_mutex mutex;
  std::unordered_map<ElementwiseKey, std::unique_ptr<ElementwiseEntry>, ElementwiseKeyHash, ElementwiseKeyEqual>
      elementwise;
  /// Other ops: key = family name + '\n' + the op's own text of its arguments.
  std::unordered_map<std::string, std::unique_ptr<OpEntry>, StringHash, std::equal_to<>> entries;
  std::vector<std::unique_ptr<ElementwiseEntry>> retired;
  std::vector<std::unique_ptr<OpEntry>> retired_entries;

  void clear() {
    std::unique_lock lock(mutex);
    for (auto& [key, entry] : elementwise) retired.push_back(std::move(entry));
    elementwise.clear();
    for (auto& [key, entry] : entries) retired_entries.push_back(std::move(entry));
    entries.clear();
  }
};

/// The entry for `key` (which must start with the family name and '\n'); on a miss `make` builds the problem
/// (parsing and validating once) and the dispatcher decides its config. Thread-safe.
OpEntry& op_entry(Runtime::Impl& impl, const Family& family, std::string_view key,
                  const std::function<std::unique_ptr<Problem>()>& make);

/// The loaded kernel in `slot` of `entry` for `config` (compiled or loaded on first use, then a pointer read).
const Kernel& op_kernel(Runtime::Impl& impl, const Family& family, OpEntry& entry, int slot, const Config& config);

}  // namespace jitune
