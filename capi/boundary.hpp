// The C ABI's boundary: the thread-local error message, the one exception-to-status mapping every entry point
// goes through, and the checks and conversions of C arguments (NULL pointers, struct sizes, enum codes, text
// buffers). Internal to capi/.
#pragma once

#include <jitune/jitune.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include <jitune/error.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>

/// The C handle: a C++ runtime.
struct jitune_runtime {
  explicit jitune_runtime(jitune::RuntimeOptions options) : runtime(std::move(options)) {}
  jitune::Runtime runtime;
};

namespace jitune::capi {

/// A caller's text buffer is too small (JITUNE_ERROR_BUFFER_TOO_SMALL).
class BufferTooSmall : public Error {
 public:
  using Error::Error;
};

/// Makes `message` this thread's last error and returns `status`. Never throws: without memory for the text
/// the message says so.
jitune_status fail(jitune_status status, std::string_view message) noexcept;
/// Empties this thread's last error (a call succeeded).
void clear_error() noexcept;
/// The status and message of the exception being handled (call only inside a catch block).
jitune_status fail_with_current_exception(const char* function) noexcept;

/// Runs `body(function)`; an exception it throws becomes a status and this thread's message, success clears
/// the message. Every entry point is one call of this.
template <class Body>
jitune_status guarded(const char* function, Body&& body) noexcept {
  try {
    body(function);
  } catch (...) {
    return fail_with_current_exception(function);
  }
  clear_error();
  return JITUNE_OK;
}

/// Throws InvalidArgument "<function>: argument '<argument>' is NULL" unless `pointer` is set.
[[noreturn]] void throw_null(const char* function, const char* argument);
template <class T>
T* require(T* pointer, const char* function, const char* argument) {
  if (!pointer) throw_null(function, argument);
  return pointer;
}
/// `count` elements at `pointer`; a NULL pointer is allowed only when count is 0.
template <class T>
std::span<T> array_arg(T* pointer, std::size_t count, const char* function, const char* argument) {
  if (!pointer && count > 0) throw_null(function, argument);
  return {pointer, count};
}
/// The runtime behind a handle.
inline Runtime& runtime_arg(jitune_runtime* runtime, const char* function) {
  return require(runtime, function, "runtime")->runtime;
}
inline const Runtime& runtime_arg(const jitune_runtime* runtime, const char* function) {
  return require(runtime, function, "runtime")->runtime;
}

/// An enum code checked against its range: InvalidArgument naming the argument and the legal codes otherwise.
DType dtype_arg(int code, const char* function, const char* argument);
int enum_arg(int code, int count, const char* type, const char* function, const char* argument);

/// Writes `text` and its NUL into `out` when out_size allows; *required (when not NULL) receives text.size()
/// + 1. Throws BufferTooSmall (nothing written) when it does not fit, InvalidArgument for NULL `out` with a
/// size.
void write_text(std::string_view text, char* out, std::size_t out_size, std::size_t* required,
                const char* function);
/// Copies `text` into a fixed char array of a result struct when it fits with its NUL; else leaves "".
template <std::size_t N>
void copy_fixed(char (&field)[N], std::string_view text) noexcept {
  const std::size_t n = text.size() < N ? text.size() : 0;
  std::memcpy(field, text.data(), n);
  field[n] = '\0';
}

/// Checks a caller struct's struct_size: at least `v0_size` (the size of the struct's first version).
void check_struct_size(std::size_t struct_size, std::size_t v0_size, const char* function,
                       const char* argument);
/// A caller-owned input struct as this library knows it: the fields its struct_size covers, zero (the
/// default) for the rest. A larger struct (a newer caller) is accepted when the bytes this library does not
/// know are zero.
template <class T>
T read_struct(const T* in, std::size_t v0_size, const char* function, const char* argument) {
  require(in, function, argument);
  const std::size_t size = in->struct_size;
  check_struct_size(size, v0_size, function, argument);
  T out{};
  std::memcpy(&out, in, std::min(size, sizeof(T)));
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (std::size_t i = sizeof(T); i < size; ++i)
    if (bytes[i] != 0)
      throw InvalidArgument(std::string(function) + ": " + argument + " has fields this libjitune (" +
                            JITUNE_VERSION + ") does not know set (struct_size " + std::to_string(size) +
                            ", known " + std::to_string(sizeof(T)) +
                            "); use a newer libjitune or leave them zero");
  return out;
}
/// Writes a result struct into a caller-owned one: the fields its struct_size covers (at least the first
/// version's), its struct_size unchanged.
template <class T>
void write_struct(T* out, T value, std::size_t v0_size, const char* function, const char* argument) {
  require(out, function, argument);
  const std::size_t size = out->struct_size;
  check_struct_size(size, v0_size, function, argument);
  value.struct_size = size;
  std::memcpy(out, &value, std::min(size, sizeof(T)));
}

/// The first version's size of a struct whose last first-version member is `member`.
#define JITUNE_V0_SIZE(type, member) (offsetof(type, member) + sizeof(static_cast<type*>(nullptr)->member))

}  // namespace jitune::capi
