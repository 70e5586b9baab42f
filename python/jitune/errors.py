"""jitune's exception classes, one per status of the C ABI (include/jitune/jitune.h, docs/c-abi.md).

Every class derives from JituneError (a RuntimeError) and carries ``.status``, the C ABI's jitune_status value
(``None`` for errors raised by the Python layer before any C call). The C++ exception behind a status keeps its
message: it says what was wrong, with which input, and what to do.

    JituneError(RuntimeError)                          .status
    ├── InvalidArgumentError(JituneError, ValueError)  1  bad shape, dtype, pointer, host array, ... (also the
    │                                                     Python layer's own argument checks)
    ├── NoDeviceError                                  2  no driver, no GPU, no device of that ordinal
    ├── CudaError                                      3  a CUDA driver call failed (after a kernel fault the
    │                                                     context is unusable)
    ├── CompileError                                   4  NVRTC rejected a kernel (the log is in the message)
    ├── StoreError                                     5  a tuning database could not be opened, read or written
    ├── OutOfMemoryError(JituneError, MemoryError)     7  host memory ran out
    └── BufferTooSmallError                            8  a text buffer was too small (handled inside jitune)

JITUNE_ERROR_OTHER (6) and JITUNE_ERROR_UNKNOWN (9) raise JituneError itself.
"""

from __future__ import annotations

__all__ = [
    "JituneError",
    "InvalidArgumentError",
    "NoDeviceError",
    "CudaError",
    "CompileError",
    "StoreError",
    "OutOfMemoryError",
    "BufferTooSmallError",
    "OK",
    "ERROR_INVALID_ARGUMENT",
    "ERROR_NO_DEVICE",
    "ERROR_CUDA",
    "ERROR_COMPILE",
    "ERROR_STORE",
    "ERROR_OTHER",
    "ERROR_OUT_OF_MEMORY",
    "ERROR_BUFFER_TOO_SMALL",
    "ERROR_UNKNOWN",
    "STATUS_NAMES",
    "error_class",
    "error_for",
]

# jitune_status values; they never change (jitune.h).
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_NO_DEVICE = 2
ERROR_CUDA = 3
ERROR_COMPILE = 4
ERROR_STORE = 5
ERROR_OTHER = 6
ERROR_OUT_OF_MEMORY = 7
ERROR_BUFFER_TOO_SMALL = 8
ERROR_UNKNOWN = 9

STATUS_NAMES = {
    OK: "JITUNE_OK",
    ERROR_INVALID_ARGUMENT: "JITUNE_ERROR_INVALID_ARGUMENT",
    ERROR_NO_DEVICE: "JITUNE_ERROR_NO_DEVICE",
    ERROR_CUDA: "JITUNE_ERROR_CUDA",
    ERROR_COMPILE: "JITUNE_ERROR_COMPILE",
    ERROR_STORE: "JITUNE_ERROR_STORE",
    ERROR_OTHER: "JITUNE_ERROR_OTHER",
    ERROR_OUT_OF_MEMORY: "JITUNE_ERROR_OUT_OF_MEMORY",
    ERROR_BUFFER_TOO_SMALL: "JITUNE_ERROR_BUFFER_TOO_SMALL",
    ERROR_UNKNOWN: "JITUNE_ERROR_UNKNOWN",
}


class JituneError(RuntimeError):
    """Base of jitune's errors. ``status`` is the C ABI's jitune_status (None when raised in Python)."""

    default_status: int | None = ERROR_OTHER

    def __init__(self, message: str = "", status: int | None = None):
        super().__init__(message)
        self.status = self.default_status if status is None else status

    @property
    def status_name(self) -> str:
        """The status's enumerator name ("JITUNE_ERROR_CUDA"), "" when there is none."""
        if self.status is None:
            return ""
        return STATUS_NAMES.get(self.status, "JITUNE_UNKNOWN_STATUS")


class InvalidArgumentError(JituneError, ValueError):
    """A bad argument: shape, dtype, pointer, host array, layout, unknown family, ... (JITUNE_ERROR_INVALID_ARGUMENT).
    Also a ValueError, so code catching bad values catches it."""

    default_status = ERROR_INVALID_ARGUMENT


class NoDeviceError(JituneError):
    """No CUDA driver, no GPU, or no device of that ordinal (JITUNE_ERROR_NO_DEVICE); the message says which."""

    default_status = ERROR_NO_DEVICE


class CudaError(JituneError):
    """A CUDA driver call failed (JITUNE_ERROR_CUDA); after a kernel fault the context is unusable."""

    default_status = ERROR_CUDA


class CompileError(JituneError):
    """NVRTC rejected a kernel (JITUNE_ERROR_COMPILE); the message holds the whole log."""

    default_status = ERROR_COMPILE


class StoreError(JituneError):
    """A tuning database could not be opened, read or written (JITUNE_ERROR_STORE)."""

    default_status = ERROR_STORE


class OutOfMemoryError(JituneError, MemoryError):
    """Host memory ran out inside jitune (JITUNE_ERROR_OUT_OF_MEMORY)."""

    default_status = ERROR_OUT_OF_MEMORY


class BufferTooSmallError(JituneError):
    """A text buffer was smaller than the text (JITUNE_ERROR_BUFFER_TOO_SMALL); jitune retries these itself."""

    default_status = ERROR_BUFFER_TOO_SMALL


_CLASSES = {
    ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    ERROR_NO_DEVICE: NoDeviceError,
    ERROR_CUDA: CudaError,
    ERROR_COMPILE: CompileError,
    ERROR_STORE: StoreError,
    ERROR_OUT_OF_MEMORY: OutOfMemoryError,
    ERROR_BUFFER_TOO_SMALL: BufferTooSmallError,
}


def error_class(status: int) -> type[JituneError]:
    """The exception class for a non-zero jitune_status (JituneError for OTHER, UNKNOWN and unknown values)."""
    return _CLASSES.get(status, JituneError)


def error_for(status: int, message: str) -> JituneError:
    """The exception for `status` with `message` (an empty message becomes the status's name)."""
    if not message:
        message = STATUS_NAMES.get(status, f"jitune status {status}")
    return error_class(status)(message, status)
