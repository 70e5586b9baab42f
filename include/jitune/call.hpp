// The one call contract: every op is a family name, the call's arguments as plain values, and its buffers. The ops
// in <jitune/ops/*.hpp> are thin inline wrappers that pack their arguments into a CallArgs and call jitune::call;
// the runtime has one dispatch for every family (one key, one pointer check, one warm-path lookup).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <jitune/error.hpp>
#include <jitune/tensor.hpp>

namespace jitune {

class Runtime;

/// The arguments of one op call that describe its problem (sizes, dtypes, modes, the expression text), plus
/// scalars that only reach the kernel (alpha). A family's `problem_from_call` reads them back in the order its
/// public wrapper added them. The warm path keys on the family, the key values and the text, byte for byte:
/// no allocation, no parsing.
class CallArgs {
 public:
  /// elementwise_view at its largest: dtype, input count, scalar mask, then 9 operands x (2 + 2 x 8 dims) = 165.
  static constexpr std::size_t kMaxValues = 168;
  static constexpr std::size_t kMaxScalars = 4;

  /// Appends one key value (a size, a dtype code, a flag).
  CallArgs& add(std::int64_t value) {
    if (count_ == kMaxValues) throw Error("jitune internal error: a call has more than 168 key values");
    values_[count_++] = value;
    return *this;
  }
  /// Appends a key value that is a double (a scale factor), by its bits.
  CallArgs& add_double(double value) { return add(std::bit_cast<std::int64_t>(value)); }
  /// Appends a sequence of key values preceded by its length.
  CallArgs& add_list(std::span<const std::int64_t> values) {
    add(static_cast<std::int64_t>(values.size()));
    for (std::int64_t v : values) add(v);
    return *this;
  }
  CallArgs& add_list(std::span<const int> values) {
    add(static_cast<std::int64_t>(values.size()));
    for (int v : values) add(v);
    return *this;
  }
  /// Sets the call's one text argument (the elementwise expression). The text must outlive the call.
  CallArgs& text(std::string_view text) {
    text_ = text;
    return *this;
  }
  /// Appends a scalar the kernel receives but the problem does not depend on (not part of the key).
  CallArgs& scalar(double value) {
    if (scalar_count_ == kMaxScalars) throw Error("jitune internal error: a call has more than 4 scalars");
    scalars_[scalar_count_++] = value;
    return *this;
  }

  std::span<const std::int64_t> values() const noexcept { return {values_, count_}; }
  std::string_view text() const noexcept { return text_; }
  std::span<const double> scalars() const noexcept { return {scalars_, scalar_count_}; }

 private:
  std::int64_t values_[kMaxValues];
  std::size_t count_ = 0;
  std::string_view text_;
  double scalars_[kMaxScalars];
  std::size_t scalar_count_ = 0;
};

/// Reads a CallArgs back in order, for a family's problem_from_call; reading past the end or a bad dtype code throws
/// InvalidArgument (a generic call gets its values from the caller).
class CallReader {
 public:
  explicit CallReader(const CallArgs& args) noexcept : values_(args.values()), text_(args.text()) {}
  /// The next key value. A generic call (jitune::call, the C ABI's jitune_call) with too few values for its
  /// family is the caller's mistake: InvalidArgument saying so.
  std::int64_t next() {
    if (at_ == values_.size())
      throw InvalidArgument("jitune: a call passed " + std::to_string(values_.size()) +
                            " key values, fewer than its family reads; docs/c-abi.md lists each family's values");
    return values_[at_++];
  }
  double next_double() { return std::bit_cast<double>(next()); }
  /// A dtype code; InvalidArgument when it names no jitune::DType.
  DType next_dtype() {
    const std::int64_t code = next();
    if (code < 0 || code > static_cast<std::int64_t>(DType::kInt64))
      throw InvalidArgument("jitune: key value " + std::to_string(at_ - 1) + " is the dtype code " +
                            std::to_string(code) + ", which names no dtype (0 float32 .. 8 int64)");
    return static_cast<DType>(code);
  }
  bool next_bool() { return next() != 0; }
  /// A list added with add_list.
  template <class T = std::int64_t>
  std::vector<T> next_list() {
    const std::int64_t n = next();
    if (n < 0 || static_cast<std::size_t>(n) > values_.size() - at_)
      throw InvalidArgument("jitune: key value " + std::to_string(at_ - 1) + " gives a list of " +
                            std::to_string(n) + " values, but only " + std::to_string(values_.size() - at_) +
                            " key values follow it");
    std::vector<T> out;
    for (std::int64_t i = 0; i < n; ++i) out.push_back(static_cast<T>(next()));
    return out;
  }
  std::string_view text() const noexcept { return text_; }

 private:
  std::span<const std::int64_t> values_;
  std::string_view text_;
  std::size_t at_ = 0;
};

/// Per-call choices that are not part of the problem.
struct CallOptions {
  /// Check every index buffer on the host before launching (a stream synchronisation and a device-to-host copy)
  /// and throw InvalidArgument naming the first index outside its bound.
  bool check_indices = false;
};

/// Runs `family` on the problem `args` describes, with `buffers` in the family's buffer order (each op's header
/// says it), asynchronously on `stream`. Checks every pointer (null, element alignment, device memory of this
/// runtime's device large enough for the buffer, outputs not overlapping other buffers) the first time a set of
/// pointers is seen at this call site, then launches the decided kernel for the pointers' alignment class.
/// Throws InvalidArgument for bad arguments, CompileError when NVRTC rejects the kernel, CudaError from the driver.
void call(Runtime& runtime, std::string_view family, const CallArgs& args, std::span<const void* const> buffers,
          Stream stream, const CallOptions& options = {});

/// The canonical problem signature of a call (what Runtime::explain and the tuning store take).
std::string call_signature(std::string_view family, const CallArgs& args);

}  // namespace jitune
