"""The few CUDA driver calls the Python layer makes itself, through ctypes on libcuda.so.1 (opened on first use).

- ``stream_wait(device, waiter, producer)``: `waiter` waits for the work queued so far on `producer` (an event
  recorded on one, waited on by the other), without blocking the host: how a consumer honours the "stream" entry
  of ``__cuda_array_interface__`` (v3) and how a JAX result made by another framework's allocation is ordered.
- ``pointer_device(ptr)``: the device ordinal that owns a device pointer (None when unknown), for
  ``__cuda_array_interface__`` arrays, which do not say.
- ``synchronize(device)``: waits for the device's primary context (at exit, before runtimes are freed).

Stream handles are CUstream values: 0 is the legacy default stream, as are 1 (CU_STREAM_LEGACY) and 2
(CU_STREAM_PER_THREAD) the handles the array protocols use.
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, byref, c_int, c_uint, c_void_p

from .errors import CudaError, NoDeviceError

_lock = threading.Lock()
_driver = None
_load_error = ""
_contexts: dict[int, int] = {}

CU_EVENT_DISABLE_TIMING = 0x2
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


def _api():
    global _driver, _load_error
    if _driver is not None:
        return _driver
    with _lock:
        if _driver is None and not _load_error:
            try:
                d = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                _load_error = f"the CUDA driver library libcuda.so.1 could not be loaded ({e})"
            else:
                protos = {
                    "cuInit": (c_uint,),
                    "cuDeviceGet": (POINTER(c_int), c_int),
                    "cuDevicePrimaryCtxRetain": (POINTER(c_void_p), c_int),
                    "cuCtxPushCurrent_v2": (c_void_p,),
                    "cuCtxPopCurrent_v2": (POINTER(c_void_p),),
                    "cuCtxSynchronize": (),
                    "cuEventCreate": (POINTER(c_void_p), c_uint),
                    "cuEventRecord": (c_void_p, c_void_p),
                    "cuStreamWaitEvent": (c_void_p, c_void_p, c_uint),
                    "cuEventDestroy_v2": (c_void_p,),
                    "cuPointerGetAttribute": (c_void_p, c_int, c_void_p),
                    "cuGetErrorName": (c_int, POINTER(ctypes.c_char_p)),
                }
                for name, args in protos.items():
                    fn = getattr(d, name)
                    fn.restype = c_int
                    fn.argtypes = list(args)
                status = d.cuInit(0)
                if status:
                    _load_error = f"cuInit failed: {_error_name(d, status)}"
                else:
                    _driver = d
    if _driver is None:
        raise NoDeviceError(_load_error + "; install the NVIDIA driver or run on a machine with a GPU")
    return _driver


def _error_name(d, status: int) -> str:
    name = ctypes.c_char_p()
    if d.cuGetErrorName(status, byref(name)) == 0 and name.value:
        return name.value.decode()
    return f"CUresult {status}"


def _check(d, status: int, what: str) -> None:
    if status:
        raise CudaError(f"{what} failed: {_error_name(d, status)}")


def _context(d, device: int) -> int:
    ctx = _contexts.get(device)
    if ctx is None:
        with _lock:
            ctx = _contexts.get(device)
            if ctx is None:
                dev = c_int()
                _check(d, d.cuDeviceGet(byref(dev), device), f"cuDeviceGet({device})")
                handle = c_void_p()
                # Retained for the process's life, as the runtimes and the frameworks do.
                _check(d, d.cuDevicePrimaryCtxRetain(byref(handle), dev.value), "cuDevicePrimaryCtxRetain")
                ctx = handle.value
                _contexts[device] = ctx
    return ctx


def _is_legacy(stream: int) -> bool:
    return stream in (0, 1)


def same_stream(a: int, b: int) -> bool:
    """True when the two CUstream handles name the same stream (0 and 1 are both the legacy default)."""
    return a == b or (_is_legacy(a) and _is_legacy(b))


def stream_wait(device: int, waiter: int, producer: int) -> None:
    """Queues on `waiter` a wait for everything queued so far on `producer` (device `device`)."""
    if same_stream(waiter, producer):
        return
    d = _api()
    ctx = _context(d, device)
    _check(d, d.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
    try:
        event = c_void_p()
        _check(d, d.cuEventCreate(byref(event), CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        try:
            _check(d, d.cuEventRecord(event, producer or None), "cuEventRecord on the producer's stream")
            _check(d, d.cuStreamWaitEvent(waiter or None, event, 0), "cuStreamWaitEvent on the consumer's stream")
        finally:
            d.cuEventDestroy_v2(event)  # released once the wait has happened
    finally:
        d.cuCtxPopCurrent_v2(byref(c_void_p()))


def pointer_device(ptr: int) -> int | None:
    """The ordinal of the device that owns device pointer `ptr`, None when the driver cannot tell."""
    if not ptr:
        return None
    try:
        d = _api()
    except NoDeviceError:
        return None
    ordinal = c_int(-1)
    if d.cuPointerGetAttribute(byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr):
        return None
    return ordinal.value


def synchronize(device: int) -> bool:
    """Waits for all work on the device's primary context; False when that failed (e.g. after a fault)."""
    try:
        d = _api()
        ctx = _context(d, device)
        if d.cuCtxPushCurrent_v2(ctx):
            return False
        try:
            return d.cuCtxSynchronize() == 0
        finally:
            d.cuCtxPopCurrent_v2(byref(c_void_p()))
    except Exception:  # noqa: BLE001 -- at exit, a broken driver means "do not free"
        return False
