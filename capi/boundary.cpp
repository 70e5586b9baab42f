// The C ABI's boundary: thread-local messages, the exception-to-status mapping, argument checks; and the
// entry points about errors themselves (jitune_last_error, jitune_status_name).
#include "capi/boundary.hpp"

#include <new>

namespace jitune::capi {
namespace {

// The message lives in `text`; `view` points at it, or at a static text when recording it failed (or at "").
struct LastError {
  std::string text;
  const char* view = "";
};

LastError& last_error() noexcept {
  thread_local LastError slot;
  return slot;
}

}  // namespace

jitune_status fail(jitune_status status, std::string_view message) noexcept {
  LastError& slot = last_error();
  try {
    slot.text.assign(message);
    slot.view = slot.text.c_str();
  } catch (...) {
    slot.view = "jitune: out of host memory while recording an error message";
  }
  return status;
}

void clear_error() noexcept {
  last_error().view = "";
}

jitune_status fail_with_current_exception(const char* function) noexcept {
  try {
    throw;
  } catch (const BufferTooSmall& e) {
    return fail(JITUNE_ERROR_BUFFER_TOO_SMALL, e.what());
  } catch (const InvalidArgument& e) {
    return fail(JITUNE_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const NoDevice& e) {
    return fail(JITUNE_ERROR_NO_DEVICE, e.what());
  } catch (const CudaError& e) {
    return fail(JITUNE_ERROR_CUDA, e.what());
  } catch (const CompileError& e) {
    return fail(JITUNE_ERROR_COMPILE, e.what());
  } catch (const StoreError& e) {
    return fail(JITUNE_ERROR_STORE, e.what());
  } catch (const Error& e) {
    return fail(JITUNE_ERROR_OTHER, e.what());
  } catch (const std::bad_alloc&) {
    last_error().view = "jitune: out of host memory";
    return JITUNE_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    try {
      return fail(JITUNE_ERROR_UNKNOWN, std::string(function) +
                                            ": unexpected C++ exception (a jitune bug; please " +
                                            "report it): " + e.what());
    } catch (...) {
      return fail(JITUNE_ERROR_UNKNOWN, e.what());
    }
  } catch (...) {
    return fail(JITUNE_ERROR_UNKNOWN,
                "jitune: an exception of unknown type (a jitune bug; please report it)");
  }
}

void throw_null(const char* function, const char* argument) {
  throw InvalidArgument(std::string(function) + ": argument '" + argument + "' is NULL");
}

int enum_arg(int code, int count, const char* type, const char* function, const char* argument) {
  if (code < 0 || code >= count)
    throw InvalidArgument(std::string(function) + ": argument '" + argument + "' is " + std::to_string(code) +
                          ", not a " + type + " (0 to " + std::to_string(count - 1) + ")");
  return code;
}

DType dtype_arg(int code, const char* function, const char* argument) {
  return static_cast<DType>(enum_arg(code, JITUNE_INT64 + 1, "jitune_dtype", function, argument));
}

void write_text(std::string_view text, char* out, std::size_t out_size, std::size_t* required,
                const char* function) {
  if (!out && out_size > 0)
    throw InvalidArgument(std::string(function) + ": argument 'out' is NULL but out_size is " +
                          std::to_string(out_size));
  const std::size_t needed = text.size() + 1;
  if (required) *required = needed;
  if (out_size < needed)
    throw BufferTooSmall(std::string(function) + ": the text needs " + std::to_string(needed) +
                         " bytes (with its NUL) but out_size is " + std::to_string(out_size) +
                         "; call again with a buffer of *required bytes");
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
}

void check_struct_size(std::size_t struct_size, std::size_t v0_size, const char* function,
                       const char* argument) {
  if (struct_size < v0_size)
    throw InvalidArgument(std::string(function) + ": " + argument + "->struct_size is " +
                          std::to_string(struct_size) + ", smaller than the struct's first version (" +
                          std::to_string(v0_size) + " bytes); set it to sizeof the struct");
}

}  // namespace jitune::capi

using namespace jitune::capi;

extern "C" {

JITUNE_API const char* jitune_last_error(void) {
  return last_error().view;
}

JITUNE_API const char* jitune_status_name(int status) {
  switch (status) {
    case JITUNE_OK:
      return "JITUNE_OK";
    case JITUNE_ERROR_INVALID_ARGUMENT:
      return "JITUNE_ERROR_INVALID_ARGUMENT";
    case JITUNE_ERROR_NO_DEVICE:
      return "JITUNE_ERROR_NO_DEVICE";
    case JITUNE_ERROR_CUDA:
      return "JITUNE_ERROR_CUDA";
    case JITUNE_ERROR_COMPILE:
      return "JITUNE_ERROR_COMPILE";
    case JITUNE_ERROR_STORE:
      return "JITUNE_ERROR_STORE";
    case JITUNE_ERROR_OTHER:
      return "JITUNE_ERROR_OTHER";
    case JITUNE_ERROR_OUT_OF_MEMORY:
      return "JITUNE_ERROR_OUT_OF_MEMORY";
    case JITUNE_ERROR_BUFFER_TOO_SMALL:
      return "JITUNE_ERROR_BUFFER_TOO_SMALL";
    case JITUNE_ERROR_UNKNOWN:
      return "JITUNE_ERROR_UNKNOWN";
    default:
      return "JITUNE_UNKNOWN_STATUS";
  }
}

JITUNE_API const char* jitune_version(void) {
  return JITUNE_VERSION;
}

}  // extern "C"
