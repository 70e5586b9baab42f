"""Arrays of any framework as (device pointer, shape, strides, dtype code, device, framework), with zero copies.

Stable names other modules (jitune.torch included) use:

- dtype codes (jitune_dtype): ``FLOAT32`` 0, ``FLOAT16`` 1, ``BFLOAT16`` 2, ``FLOAT64`` 3, ``INT8`` 4, ``UINT8`` 5,
  ``INT16`` 6, ``INT32`` 7, ``INT64`` 8; ``DTYPE_NAMES[code]``, ``ITEMSIZE[code]``; ``dtype_code(x)`` for a name
  ("float16", "torch.float16", "f2"), a numpy / JAX / torch dtype or a code; ``dtype_name(code)``.
- ``torch_dtype_codes()``: {torch.dtype: code} (torch must be imported by the caller); ``torch_dtype(code)``.
- ``Operand``: one converted array (``ptr``, ``shape``, ``strides`` in elements, ``dtype``, ``device``,
  ``framework``, ``obj``; ``keep`` holds what must stay alive while the pointer is used).
- ``convert(named, stream=None) -> (operands, device, stream, framework)``: the arrays of one op call.
- ``stream_handle(s)``, ``current_stream(framework, device)``, ``allocate(...)``, ``meta(x)``,
  ``ShapeDtype``, ``is_contiguous(shape, strides)``, ``parse_dlpack_capsule(capsule)``, ``from_cai(x)``.

Protocols, in order:
1. torch.Tensor (recognised by ``type(x).__module__``, so torch is never imported for other arrays):
   ``data_ptr()`` (storage offset included), ``shape``, ``stride()``, ``dtype``, ``device``.
2. ``__cuda_array_interface__`` (CuPy, Numba, ...): ``data`` (pointer, read-only flag), ``typestr``, ``strides``
   in bytes (None: C-contiguous). Version 3's ``stream`` entry is honoured as the spec asks of a consumer: the
   op's stream waits (an event, not a host synchronisation) for the producer's stream unless they are the same.
   bfloat16 has no typestr: such arrays go through DLPack when they offer it.
3. ``__dlpack__`` (JAX arrays always take this path, and anything else): ``__dlpack_device__()`` first (a host
   array is refused before any export), then ``__dlpack__(stream=<the op's stream>, max_version=(1, 0))`` (older
   producers: without max_version), so the producer orders its pending work before the op's stream (1 is passed
   for the legacy default stream, as the array API specifies). The capsule ("dltensor" or "dltensor_versioned")
   is read but not consumed: it is not renamed, so its own destructor calls the producer's deleter when the
   capsule is released, after the op call returns. A versioned capsule's read-only and copied flags are honoured
   for arrays jitune writes.

Streams: an op's default stream is the current stream of the first array's framework on its device (torch:
``torch._C._cuda_getCurrentRawStream``; CuPy: ``cupy.cuda.get_current_stream().ptr``), else the legacy default
stream (0). ``stream=`` may be an int handle, a torch.cuda.Stream, a CuPy stream, an object with
``__cuda_stream__``, or a Numba stream.
"""

from __future__ import annotations

import ctypes
import math
import sys
from ctypes import (POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64,
                    c_void_p)

from . import _cuda
from .errors import InvalidArgumentError

FLOAT32, FLOAT16, BFLOAT16, FLOAT64, INT8, UINT8, INT16, INT32, INT64 = range(9)
DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64")
ITEMSIZE = (4, 2, 2, 8, 1, 1, 2, 4, 8)
FLOAT_DTYPES = (FLOAT32, FLOAT16, BFLOAT16)

_ALIASES = {name: code for code, name in enumerate(DTYPE_NAMES)}
_ALIASES.update({
    "float": FLOAT32, "f4": FLOAT32, "half": FLOAT16, "f2": FLOAT16, "bf16": BFLOAT16, "double": FLOAT64,
    "f8": FLOAT64, "i1": INT8, "u1": UINT8, "i2": INT16, "short": INT16, "i4": INT32, "int": INT32, "i8": INT64,
    "long": INT64,
})
# __cuda_array_interface__ typestr ('<' little-endian, '|' not applicable).
_TYPESTR = {"<f4": FLOAT32, "<f2": FLOAT16, "<f8": FLOAT64, "|i1": INT8, "<i1": INT8, "|u1": UINT8, "<u1": UINT8,
            "<i2": INT16, "<i4": INT32, "<i8": INT64}
# DLPack (DLDataTypeCode, bits) with lanes == 1: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4.
_DLPACK_DTYPES = {(2, 32): FLOAT32, (2, 16): FLOAT16, (4, 16): BFLOAT16, (2, 64): FLOAT64, (0, 8): INT8,
                  (1, 8): UINT8, (0, 16): INT16, (0, 32): INT32, (0, 64): INT64}

HOST_MOVE_HINT = "move it with .cuda() / cupy.asarray / jax.device_put"


def _supported(codes=None) -> str:
    return ", ".join(DTYPE_NAMES[c] for c in (codes if codes is not None else range(9)))


def dtype_code(dtype, name: str = "dtype") -> int:
    """The jitune dtype code of `dtype`: a code, a name or alias ("float16", "half", "torch.bfloat16", "<f4"), a
    numpy / JAX dtype or scalar type, or a torch.dtype."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if 0 <= dtype < len(DTYPE_NAMES):
            return dtype
    else:
        key = None
        if isinstance(dtype, str):
            key = dtype
        elif type(dtype).__module__ == "torch":
            key = str(dtype)
        else:
            inner = getattr(dtype, "dtype", None)  # numpy scalar types, jnp.float32, ...
            key = getattr(dtype, "name", None) or getattr(inner, "name", None) or getattr(dtype, "__name__", None)
        if key is not None:
            key = key.lower()
            if key.startswith("torch."):
                key = key[6:]
            code = _ALIASES.get(key)
            if code is None:
                code = _TYPESTR.get(key) or _TYPESTR.get("<" + key.lstrip("<|="))
            if code is not None:
                return code
    raise InvalidArgumentError(f"{name}: unsupported dtype {dtype!r}; jitune knows {_supported()}")


def dtype_name(code: int) -> str:
    """"float32", ... for a dtype code."""
    return DTYPE_NAMES[code]


_torch_codes = None
_torch_dtypes = None


def torch_dtype_codes() -> dict:
    """{torch.dtype: jitune dtype code} for the nine dtypes (call only where torch is imported)."""
    global _torch_codes, _torch_dtypes
    if _torch_codes is None:
        import torch

        dtypes = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
                  torch.int32, torch.int64)
        _torch_dtypes = dtypes
        _torch_codes = {d: code for code, d in enumerate(dtypes)}
    return _torch_codes


def torch_dtype(code: int):
    """The torch.dtype of a jitune dtype code."""
    torch_dtype_codes()
    return _torch_dtypes[code]


class ShapeDtype:
    """A placeholder for an array in signature / explain / tune calls: its shape and dtype, no data (no GPU
    needed). ``layout`` is not kept: pass layout= to the upsample functions as for any non-torch array."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        if isinstance(shape, int):
            shape = (shape,)
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype_code(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]

    def __repr__(self) -> str:
        return f"ShapeDtype({self.shape}, {DTYPE_NAMES[self.dtype]!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ShapeDtype) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))


class Operand:
    """One array of an op call: device pointer (offset applied), shape, strides in elements, dtype code, device
    ordinal (None when unknown), framework ("torch", "cupy", "jax", "cai", "dlpack"), the object, what to keep
    alive, whether it is read-only, and the producer's stream to wait for (None: none)."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "framework", "obj", "keep", "readonly",
                 "producer_stream")

    def __init__(self, ptr, shape, strides, dtype, device, framework, obj, keep=None, readonly=False,
                 producer_stream=None):
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.framework = framework
        self.obj = obj
        self.keep = keep
        self.readonly = readonly
        self.producer_stream = producer_stream

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return (f"Operand(ptr={self.ptr:#x}, shape={self.shape}, strides={self.strides}, "
                f"dtype={DTYPE_NAMES[self.dtype]}, device={self.device}, framework={self.framework!r})")


def contiguous_strides(shape) -> tuple:
    """C-contiguous strides, in elements."""
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def is_contiguous(shape, strides) -> bool:
    """True when strides (in elements; None: contiguous) lay shape out C-contiguously (size-1 dims ignored)."""
    if strides is None or 0 in shape:
        return True
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def host_error(name: str, where: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{name} is in host memory (device type {where}): jitune ops take CUDA device arrays; {HOST_MOVE_HINT}")


# --- torch


def from_torch(x, name: str) -> Operand:
    """A torch.Tensor as an Operand (no copy)."""
    if not x.is_cuda:  # (is_cuda and get_device() cost less than building x.device)
        kind = x.device.type
        if kind == "cpu":
            raise host_error(name, "CPU")
        raise InvalidArgumentError(
            f"{name} is on device type {kind}: jitune ops take CUDA device arrays; {HOST_MOVE_HINT}")
    codes = _torch_codes if _torch_codes is not None else torch_dtype_codes()
    code = codes.get(x.dtype)
    if code is None:
        raise InvalidArgumentError(f"{name} has dtype {x.dtype}, which jitune does not take; it takes {_supported()}")
    # torch.Size is a tuple.
    return Operand(x.data_ptr(), x.shape, x.stride(), code, x.get_device(), "torch", x)


# --- __cuda_array_interface__


def from_cai(x, name: str, cai=None) -> Operand:
    """An object with __cuda_array_interface__ as an Operand. The device comes from CuPy's ``x.device.id`` or the
    driver's pointer attributes (None when neither can tell)."""
    if cai is None:
        cai = x.__cuda_array_interface__
    shape = tuple(int(n) for n in cai["shape"])
    typestr = cai["typestr"]
    code = _TYPESTR.get(typestr)
    if code is None:
        raise InvalidArgumentError(
            f"{name} has __cuda_array_interface__ typestr {typestr!r}, which jitune does not take; it takes "
            f"{_supported()} (bfloat16 only through DLPack)")
    ptr, readonly = cai["data"]
    ptr = int(ptr or 0)
    strides = cai.get("strides")
    if strides is None:
        strides = contiguous_strides(shape)
    else:
        size = ITEMSIZE[code]
        if any(s % size for s in strides):
            raise InvalidArgumentError(
                f"{name} has byte strides {tuple(strides)} that are not multiples of its {size}-byte elements; "
                "make it contiguous first")
        strides = tuple(int(s) // size for s in strides)
    if cai.get("mask") is not None:
        raise InvalidArgumentError(f"{name} is a masked array (__cuda_array_interface__ 'mask'); jitune takes none")
    producer = cai.get("stream") if cai.get("version", 0) >= 3 else None
    if producer == 0:
        raise InvalidArgumentError(
            f"{name}'s __cuda_array_interface__ has stream 0, which the protocol forbids (1: legacy default stream, "
            "2: per-thread default stream)")
    module = type(x).__module__
    if module.startswith("cupy"):
        framework = "cupy"
        device = x.device.id
    else:
        framework = "cai"
        device = _cuda.pointer_device(ptr)
    return Operand(ptr, shape, strides, code, device, framework, x, None, bool(readonly),
                   None if producer is None else int(producer))


# --- DLPack

_kDLCPU, _kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged = 1, 2, 3, 13
_DEVICE_TYPE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDAHost", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
                      10: "ROCM", 11: "ROCMHost", 12: "ExtDev", 13: "CUDAManaged", 14: "OneAPI", 15: "WebGPU",
                      16: "Hexagon"}
_FLAG_READ_ONLY = 1
_FLAG_IS_COPIED = 2


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p), ("flags", c_uint64),
                ("dl_tensor", DLTensor)]


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = c_int
_capsule_is_valid.argtypes = [ctypes.py_object, c_char_p]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, c_char_p]
_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]


class DLPackInfo:
    """What a DLPack capsule describes: ``ptr`` (data + byte_offset), ``data``, ``byte_offset``, ``shape``,
    ``strides`` (elements; C-contiguous ones when the capsule has none), ``dtype`` (code, None when jitune has
    none), ``dl_dtype`` (code, bits, lanes), ``device_type``, ``device_id``, ``readonly``, ``copied``,
    ``versioned``."""

    __slots__ = ("ptr", "data", "byte_offset", "shape", "strides", "dtype", "dl_dtype", "device_type", "device_id",
                 "readonly", "copied", "versioned")

    def __repr__(self) -> str:
        return "DLPackInfo(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def parse_dlpack_capsule(capsule, name: str = "array") -> DLPackInfo:
    """Reads a DLPack capsule without consuming it (the caller keeps it alive while using the pointer)."""
    if type(capsule).__name__ != "PyCapsule":
        raise InvalidArgumentError(f"{name}.__dlpack__() returned {type(capsule).__name__}, not a PyCapsule")
    info = DLPackInfo()
    flags = 0
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed = DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, b"dltensor_versioned"))
        if managed.version.major != 1:
            raise InvalidArgumentError(
                f"{name}: DLPack version {managed.version.major}.{managed.version.minor} is not supported "
                "(jitune reads major version 1)")
        tensor = managed.dl_tensor
        flags = managed.flags
        info.versioned = True
    elif _capsule_is_valid(capsule, b"dltensor"):
        tensor = DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor")).dl_tensor
        info.versioned = False
    else:
        cname = _capsule_get_name(capsule)
        cname = cname.decode() if cname else None
        if cname and cname.startswith("used_"):
            raise InvalidArgumentError(f"{name}: the DLPack capsule was already consumed ({cname!r})")
        raise InvalidArgumentError(f"{name}: a capsule named {cname!r} is not a DLPack tensor")
    ndim = tensor.ndim
    info.shape = tuple(tensor.shape[i] for i in range(ndim))
    info.strides = (tuple(tensor.strides[i] for i in range(ndim)) if tensor.strides
                    else contiguous_strides(info.shape))
    info.data = tensor.data or 0
    info.byte_offset = tensor.byte_offset
    info.ptr = info.data + info.byte_offset
    dt = tensor.dtype
    info.dl_dtype = (dt.code, dt.bits, dt.lanes)
    info.dtype = _DLPACK_DTYPES.get((dt.code, dt.bits)) if dt.lanes == 1 else None
    info.device_type = tensor.device.device_type
    info.device_id = tensor.device.device_id
    info.readonly = bool(flags & _FLAG_READ_ONLY)
    info.copied = bool(flags & _FLAG_IS_COPIED)
    return info


def _dlpack_device(x, name: str):
    try:
        device_type, device_id = x.__dlpack_device__()
    except AttributeError:
        return None
    return int(device_type), int(device_id)


def _check_device_type(device_type: int, name: str) -> None:
    if device_type in (_kDLCUDA, _kDLCUDAManaged):
        return
    where = _DEVICE_TYPE_NAMES.get(device_type, str(device_type))
    if device_type in (_kDLCPU, _kDLCUDAHost):
        raise host_error(name, where)
    raise InvalidArgumentError(f"{name} is on a {where} device: jitune ops take CUDA device arrays")


def _export_dlpack(x, stream):
    """x.__dlpack__ with the consumer's stream (None for host arrays), asking for a versioned capsule first."""
    try:
        return x.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:
        return x.__dlpack__(stream=stream)


def from_dlpack(x, name: str, stream: int | None, framework: str = "dlpack") -> Operand:
    """An object with __dlpack__ as an Operand. `stream` is the consumer's CUDA stream (0 and 1: the legacy
    default); None exports without one (the producer then assumes the legacy default stream)."""
    dev = _dlpack_device(x, name)
    if dev is not None:
        _check_device_type(dev[0], name)
    dl_stream = None if stream is None else (1 if stream == 0 else stream)
    try:
        capsule = _export_dlpack(x, dl_stream)
    except (BufferError, ValueError, RuntimeError) as e:
        raise InvalidArgumentError(f"{name}.__dlpack__() failed: {e}") from e
    info = parse_dlpack_capsule(capsule, name)
    _check_device_type(info.device_type, name)
    if info.dtype is None:
        code, bits, lanes = info.dl_dtype
        raise InvalidArgumentError(
            f"{name} has DLPack dtype (code {code}, {bits} bits, {lanes} lanes), which jitune does not take; it "
            f"takes {_supported()}")
    return Operand(info.ptr, info.shape, info.strides, info.dtype, info.device_id, framework, x,
                   (capsule, info.copied), info.readonly)


def dlpack_info(x, name: str = "array") -> DLPackInfo:
    """The DLPack description of `x` (host arrays included: exported with stream=None), without checks."""
    capsule = _export_dlpack(x, None)
    return parse_dlpack_capsule(capsule, name)


# --- Streams


def stream_handle(stream) -> int:
    """A CUstream handle (int) from an int, torch.cuda.Stream, CuPy stream, __cuda_stream__ object or Numba
    stream."""
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attr in ("cuda_stream", "ptr"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    handle = getattr(stream, "handle", None)
    if handle is not None:
        v = getattr(handle, "value", handle)
        return int(v or 0)
    raise InvalidArgumentError(
        f"stream must be an int (a CUstream / cudaStream_t handle), a torch.cuda.Stream or a CuPy stream; got "
        f"{type(stream).__name__}")


def current_stream(framework: str, device: int) -> int:
    """The framework's current stream on `device` (torch, CuPy); 0, the legacy default stream, for others."""
    if framework == "torch":
        return sys.modules["torch"]._C._cuda_getCurrentRawStream(device)
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        try:
            return cupy.cuda.get_current_stream(device).ptr
        except TypeError:
            return cupy.cuda.get_current_stream().ptr
    return 0


# --- Converting the arrays of one call

_PROTO_TORCH, _PROTO_CAI, _PROTO_DLPACK = 0, 1, 2


def _protocol(x, name: str) -> int:
    module = type(x).__module__
    if module == "torch" or module.startswith("torch."):
        return _PROTO_TORCH
    if module.startswith(("jax", "jaxlib")):
        return _PROTO_DLPACK
    if hasattr(x, "__cuda_array_interface__"):
        return _PROTO_CAI
    if hasattr(x, "__dlpack__"):
        return _PROTO_DLPACK
    if hasattr(x, "__array_interface__") or hasattr(x, "__array__") or isinstance(x, (list, tuple, int, float)):
        raise host_error(name, "CPU")
    raise InvalidArgumentError(
        f"{name} is a {type(x).__module__}.{type(x).__name__}, not an array jitune can read: pass a CUDA "
        "torch.Tensor, a CuPy or JAX array, or anything with __cuda_array_interface__ or __dlpack__")


def _immutable_error(name: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{name} is a JAX array, which is immutable: jitune cannot write into it; leave out=None (a new JAX array "
        "is returned), or use a torch / CuPy array for ops that update in place")


def _writable_check(op: Operand, name: str) -> None:
    if op.framework == "jax":
        raise _immutable_error(name)
    if op.readonly:
        raise InvalidArgumentError(f"{name} is read-only (its producer says so); jitune would write into it")
    if op.keep is not None and op.keep[1]:
        raise InvalidArgumentError(
            f"{name}: its DLPack producer handed over a copy, so jitune's writes would be lost; pass an array "
            "that can be shared without a copy")


def convert(named, stream=None):
    """Converts the arrays of one op call.

    named: (name, object, writable) triples; None objects are skipped (their slot stays None). The first array
    decides the framework (for the default stream and for allocating outputs).
    Returns (operands, device, stream handle, framework). All arrays must be on one CUDA device; the default
    stream is the framework's current stream there (see the module's docstring), and DLPack producers and
    __cuda_array_interface__ v3 producers are ordered before it.
    """
    operands = [None] * len(named)
    device = None
    device_name = None
    framework = None
    pending = []
    for i, (name, x, writable) in enumerate(named):
        if x is None:
            continue
        proto = _protocol(x, name)
        if proto == _PROTO_TORCH:
            op = from_torch(x, name)
        elif proto == _PROTO_CAI:
            cai = x.__cuda_array_interface__
            if cai.get("typestr") not in _TYPESTR and hasattr(x, "__dlpack__"):
                op = None  # bfloat16 and other types CAI cannot spell: DLPack
                pending.append(i)
                dev = _dlpack_device(x, name)
            else:
                op = from_cai(x, name, cai)
        else:
            op = None
            pending.append(i)
            dev = _dlpack_device(x, name)
        if op is not None:
            operands[i] = op
            dev_i = op.device
            fw = op.framework
            if writable:
                _writable_check(op, name)
        else:
            if dev is not None:
                _check_device_type(dev[0], name)
                dev_i = dev[1]
            else:
                dev_i = None
            fw = "jax" if type(x).__module__.startswith(("jax", "jaxlib")) else "dlpack"
            if writable and fw == "jax":
                raise _immutable_error(name)
        if framework is None:
            framework = fw
        if dev_i is not None:
            if device is None:
                device, device_name = dev_i, name
            elif dev_i != device:
                raise InvalidArgumentError(
                    f"{name} is on CUDA device {dev_i} but {device_name} is on CUDA device {device}: one op's arrays "
                    f"must share a device; move them with .to('cuda:{device}') / cupy.asarray under "
                    f"cupy.cuda.Device({device}) / jax.device_put")
    if device is None:
        device = 0
    if stream is None:
        stream = current_stream(framework, device) if framework in ("torch", "cupy") else 0
    else:
        stream = stream_handle(stream)
    for i in pending:
        name, x, writable = named[i]
        op = from_dlpack(x, name, stream, "jax" if type(x).__module__.startswith(("jax", "jaxlib")) else "dlpack")
        if op.device != device:
            raise InvalidArgumentError(
                f"{name} is on CUDA device {op.device} but {device_name} is on CUDA device {device}: one op's arrays "
                "must share a device")
        if writable:
            _writable_check(op, name)
        operands[i] = op
    for op in operands:
        if op is not None and op.producer_stream is not None:
            _cuda.stream_wait(device, stream, op.producer_stream)
    return operands, device, stream, framework


# --- Outputs


class Allocation:
    """An output jitune allocated: ``ptr`` to write, ``result()`` the array to hand back (a JAX array for JAX
    callers, made zero-copy with jax.dlpack.from_dlpack once the op is queued)."""

    __slots__ = ("array", "ptr", "framework", "device", "stream", "to_jax")

    def __init__(self, array, ptr, framework, device, stream, to_jax):
        self.array = array
        self.ptr = ptr
        self.framework = framework
        self.device = device
        self.stream = stream
        self.to_jax = to_jax

    def result(self):
        if not self.to_jax:
            return self.array
        # JAX's import orders its stream after the allocating framework's current stream: make that stream wait
        # for the op's stream first.
        _cuda.stream_wait(self.device, current_stream(self.framework, self.device), self.stream)
        import jax.dlpack

        try:
            return jax.dlpack.from_dlpack(self.array)
        except TypeError:  # older JAX: a capsule
            return jax.dlpack.from_dlpack(self.array.__dlpack__())


def _allocate_torch(shape, code, device, channels_last):
    import torch

    kwargs = {"memory_format": torch.channels_last} if channels_last else {}
    t = torch.empty(shape, dtype=torch_dtype(code), device=torch.device("cuda", device), **kwargs)
    return t, t.data_ptr()


def _allocate_cupy(shape, code, device):
    import cupy

    if code == BFLOAT16:
        raise InvalidArgumentError(
            "CuPy has no bfloat16 arrays for the output: pass out= (a CUDA bfloat16 array, e.g. from torch)")
    with cupy.cuda.Device(device):
        a = cupy.empty(shape, dtype=DTYPE_NAMES[code])
    return a, a.data.ptr


def allocate(framework: str, shape, code: int, device: int, stream: int, channels_last: bool = False) -> Allocation:
    """An uninitialised output of `shape` / dtype `code` on `device` in the caller's framework: torch.empty /
    cupy.empty; for JAX and other producers torch (else CuPy) allocates and JAX callers get a JAX array back.
    channels_last: a torch.channels_last tensor (torch only; shape stays N, C, H, W). Raises
    InvalidArgumentError when nothing can allocate (pass out=)."""
    shape = tuple(shape)
    if framework == "torch":
        a, ptr = _allocate_torch(shape, code, device, channels_last)
        return Allocation(a, ptr, "torch", device, stream, False)
    if framework == "cupy":
        a, ptr = _allocate_cupy(shape, code, device)
        return Allocation(a, ptr, "cupy", device, stream, False)
    to_jax = framework == "jax"
    try:
        a, ptr = _allocate_torch(shape, code, device, False)
        return Allocation(a, ptr, "torch", device, stream, to_jax)
    except ImportError:
        pass
    try:
        a, ptr = _allocate_cupy(shape, code, device)
        return Allocation(a, ptr, "cupy", device, stream, to_jax)
    except ImportError:
        pass
    what = "JAX arrays are immutable" if to_jax else f"jitune cannot allocate {framework} arrays"
    raise InvalidArgumentError(
        f"{what} and neither torch nor CuPy is installed to allocate the output: pass out= (a CUDA array of "
        f"shape {shape} and dtype {DTYPE_NAMES[code]})")


# --- Metadata only (signatures)


class Meta:
    """Shape and dtype of an array or ShapeDtype, with strides when known (None: assume contiguous) and whether it
    is a torch tensor in channels_last layout."""

    __slots__ = ("shape", "dtype", "strides", "channels_last")

    def __init__(self, shape, dtype, strides=None, channels_last=False):
        self.shape = shape
        self.dtype = dtype
        self.strides = strides
        self.channels_last = channels_last

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def torch_is_channels_last(shape, strides) -> bool:
    """True for a 4-d NCHW tensor laid out NHWC-contiguous but not NCHW-contiguous (torch.channels_last)."""
    if len(shape) != 4 or strides is None or is_contiguous(shape, strides):
        return False
    n, c, h, w = shape
    return is_contiguous((n, h, w, c), (strides[0], strides[2], strides[3], strides[1]))


def meta(x, name: str = "array") -> Meta:
    """Shape and dtype of `x` wherever it lives (host arrays and ShapeDtype placeholders included)."""
    if isinstance(x, ShapeDtype):
        return Meta(x.shape, x.dtype)
    module = type(x).__module__
    if module == "torch" or module.startswith("torch."):
        codes = torch_dtype_codes()
        code = codes.get(x.dtype)
        if code is None:
            raise InvalidArgumentError(f"{name} has dtype {x.dtype}, which jitune does not take; it takes "
                                       f"{_supported()}")
        shape, strides = tuple(x.shape), tuple(x.stride())
        return Meta(shape, code, strides, torch_is_channels_last(shape, strides))
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is not None and dtype is not None:
        return Meta(tuple(int(n) for n in shape), dtype_code(dtype, name))
    if hasattr(x, "__cuda_array_interface__"):
        cai = x.__cuda_array_interface__
        code = _TYPESTR.get(cai["typestr"])
        if code is None:
            raise InvalidArgumentError(f"{name}: unsupported typestr {cai['typestr']!r}")
        return Meta(tuple(int(n) for n in cai["shape"]), code)
    if hasattr(x, "__dlpack__"):
        info = dlpack_info(x, name)
        if info.dtype is None:
            raise InvalidArgumentError(f"{name}: unsupported DLPack dtype {info.dl_dtype}")
        return Meta(info.shape, info.dtype, info.strides)
    raise InvalidArgumentError(
        f"{name} is a {type(x).__name__}: pass an array or jitune.ShapeDtype(shape, dtype)")


def device_of(x):
    """The CUDA device ordinal of an array, None for ShapeDtype, host arrays and unknown objects."""
    if isinstance(x, ShapeDtype):
        return None
    module = type(x).__module__
    if module == "torch" or module.startswith("torch."):
        return x.device.index if x.device.type == "cuda" else None
    if module.startswith("cupy"):
        return x.device.id
    dev = None
    if hasattr(x, "__dlpack_device__"):
        try:
            dev = _dlpack_device(x, "array")
        except Exception:  # noqa: BLE001 -- metadata only
            dev = None
    if dev is not None and dev[0] in (_kDLCUDA, _kDLCUDAManaged):
        return dev[1]
    return None
