"""Reading arrays without a GPU: DLPack capsules (numpy's, and hand-made CUDA ones with a byte offset, no strides,
flags, a versioned header), __cuda_array_interface__ objects pointing at fake device pointers, dtype names,
stream handles, and the errors ops raise before any kernel (host arrays, mixed devices, non-contiguous arrays,
shape and dtype mismatches)."""
import ctypes
import gc

import pytest

import jitune
from jitune import _arrays
from jitune._arrays import (DLManagedTensor, DLManagedTensorVersioned, DLTensor, Operand, ShapeDtype,
                            parse_dlpack_capsule)

np = pytest.importorskip("numpy")

HOST = "x is in host memory (device type CPU): jitune ops take CUDA device arrays; move it with .cuda() / " \
       "cupy.asarray / jax.device_put"


# --- dtypes


@pytest.mark.parametrize("spec, code", [
    ("float32", 0), ("float", 0), ("f4", 0), ("<f4", 0), ("float16", 1), ("half", 1), ("bfloat16", 2), ("bf16", 2),
    ("float64", 3), ("int8", 4), ("|u1", 5), ("uint8", 5), ("int16", 6), ("int32", 7), ("int64", 8),
    ("torch.bfloat16", 2), (7, 7),
])
def test_dtype_names(spec, code):
    assert _arrays.dtype_code(spec) == code


def test_numpy_dtypes():
    for name, code in (("float32", 0), ("float16", 1), ("float64", 3), ("int8", 4), ("uint8", 5), ("int16", 6),
                       ("int32", 7), ("int64", 8)):
        assert _arrays.dtype_code(np.dtype(name)) == code
        assert _arrays.dtype_code(getattr(np, name)) == code
    with pytest.raises(jitune.InvalidArgumentError, match="unsupported dtype.*float32, float16, bfloat16"):
        _arrays.dtype_code(np.complex64)
    with pytest.raises(jitune.InvalidArgumentError):
        _arrays.dtype_code(9)
    with pytest.raises(jitune.InvalidArgumentError):
        _arrays.dtype_code(True)


def test_shape_dtype():
    s = ShapeDtype((2, 3), "bfloat16")
    assert s.shape == (2, 3) and s.dtype == 2 and s.dtype_name == "bfloat16" and s.size == 6 and s.ndim == 2
    assert ShapeDtype(5, np.float32).shape == (5,)
    assert s == ShapeDtype([2, 3], 2) and hash(s) == hash(ShapeDtype((2, 3), "bf16"))


# --- DLPack from numpy (device CPU)


@pytest.mark.parametrize("dtype, code", [("float32", 0), ("float16", 1), ("float64", 3), ("int8", 4), ("uint8", 5),
                                         ("int16", 6), ("int32", 7), ("int64", 8)])
def test_numpy_dlpack_capsules(dtype, code):
    base = np.arange(5 * 7 * 3).astype(dtype).reshape(5, 7, 3)
    for a in (base, base[1:, ::2, :], base.transpose(2, 0, 1), base[2]):
        info = _arrays.dlpack_info(a)
        assert info.shape == a.shape
        assert info.strides == tuple(s // a.itemsize for s in a.strides)
        assert info.dtype == code
        assert info.ptr == a.ctypes.data
        assert info.data + info.byte_offset == a.ctypes.data
        assert info.device_type == 1 and info.device_id == 0


def test_numpy_bool_has_no_jitune_dtype():
    info = _arrays.dlpack_info(np.zeros(3, dtype=bool))
    assert info.dtype is None and info.dl_dtype[1] == 8


def test_host_arrays_are_refused():
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(jitune.InvalidArgumentError) as info:
        _arrays.convert((("x", a, False),))
    assert str(info.value) == HOST
    with pytest.raises(jitune.InvalidArgumentError, match="host memory"):
        jitune.permute(a, (1, 0))
    with pytest.raises(jitune.InvalidArgumentError, match="host memory"):
        jitune.sum_rows([1.0, 2.0])
    with pytest.raises(jitune.InvalidArgumentError, match="not an array jitune can read"):
        jitune.sum_rows(object())


# --- Hand-made CUDA DLPack capsules

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class FakeCudaArray:
    """A CUDA producer without a CUDA device: __dlpack__ hands out a capsule describing a fake device pointer and
    records how it was asked; the capsule's destructor records that it ran (the producer's deleter would)."""

    def __init__(self, shape, dl_dtype=(2, 32, 1), data=0x7F0000000000, byte_offset=0, strides=None, device_id=0,
                 versioned=False, flags=0, major=1, accepts_max_version=True):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(shape))(*strides) if strides is not None else None
        t = DLTensor()
        t.data = data
        t.device.device_type = 2
        t.device.device_id = device_id
        t.ndim = len(shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = dl_dtype
        t.shape = self.shape
        t.strides = self.strides
        t.byte_offset = byte_offset
        if versioned:
            self.managed = DLManagedTensorVersioned()
            self.managed.version.major, self.managed.version.minor = major, 0
            self.managed.flags = flags
        else:
            self.managed = DLManagedTensor()
        self.managed.dl_tensor = t
        self.name = b"dltensor_versioned" if versioned else b"dltensor"
        self.device_id = device_id
        self.accepts_max_version = accepts_max_version
        self.calls = []
        self.released = []
        self._destructor = _DESTRUCTOR(lambda _p: self.released.append(True))

    def __dlpack_device__(self):
        return (2, self.device_id)

    def __dlpack__(self, stream=None, **kw):
        if "max_version" in kw and not self.accepts_max_version:
            raise TypeError("unexpected keyword argument 'max_version'")
        self.calls.append(dict(stream=stream, **kw))
        return _capsule_new(ctypes.addressof(self.managed), self.name,
                            ctypes.cast(self._destructor, ctypes.c_void_p).value)


def test_a_cuda_capsule_with_a_byte_offset_and_no_strides():
    x = FakeCudaArray((3, 4, 5), dl_dtype=(4, 16, 1), byte_offset=6)
    capsule = x.__dlpack__()
    info = parse_dlpack_capsule(capsule)
    assert info.ptr == 0x7F0000000000 + 6 and info.byte_offset == 6
    assert info.shape == (3, 4, 5) and info.strides == (20, 5, 1)
    assert info.dtype == _arrays.BFLOAT16 and info.device_type == 2 and not info.versioned
    del capsule
    gc.collect()
    assert x.released == [True]


def test_a_cuda_array_through_dlpack_keeps_its_capsule_unconsumed():
    x = FakeCudaArray((8, 2), strides=(2, 1))
    (op,), device, stream, framework = _arrays.convert((("x", x, False),))
    assert (device, stream, framework) == (0, 0, "dlpack")
    assert op.ptr == 0x7F0000000000 and op.shape == (8, 2) and op.strides == (2, 1) and op.dtype == 0
    # The consumer's stream went to the producer (1: the legacy default stream), with the version asked for.
    assert x.calls == [dict(stream=1, max_version=(1, 0))]
    capsule = op.keep[0]
    assert _capsule_name(capsule) == b"dltensor"  # not consumed: its destructor frees it
    assert not x.released
    del op, capsule
    gc.collect()
    assert x.released == [True]


def test_dlpack_with_an_explicit_stream_and_an_old_producer():
    x = FakeCudaArray((4,), accepts_max_version=False)
    (op,), _, stream, _ = _arrays.convert((("x", x, False),), stream=0x1234)
    assert stream == 0x1234 and x.calls == [dict(stream=0x1234)]


def test_versioned_capsules_and_their_flags():
    x = FakeCudaArray((2, 2), versioned=True, flags=1)
    (op,), _, _, _ = _arrays.convert((("x", x, False),))
    assert op.readonly and op.shape == (2, 2)
    with pytest.raises(jitune.InvalidArgumentError, match="read-only"):
        _arrays.convert((("out", FakeCudaArray((2, 2), versioned=True, flags=1), True),))
    with pytest.raises(jitune.InvalidArgumentError, match="copy"):
        _arrays.convert((("out", FakeCudaArray((2, 2), versioned=True, flags=2), True),))
    with pytest.raises(jitune.InvalidArgumentError, match="DLPack version 2.0"):
        _arrays.convert((("x", FakeCudaArray((2, 2), versioned=True, major=2), False),))


def test_unsupported_dlpack_dtypes_and_lanes():
    with pytest.raises(jitune.InvalidArgumentError, match=r"code 5, 64 bits.*float32"):
        _arrays.convert((("x", FakeCudaArray((2,), dl_dtype=(5, 64, 1)), False),))
    with pytest.raises(jitune.InvalidArgumentError, match="2 lanes"):
        _arrays.convert((("x", FakeCudaArray((2,), dl_dtype=(2, 32, 2)), False),))


def test_mixed_devices_are_named():
    with pytest.raises(jitune.InvalidArgumentError, match="y is on CUDA device 1 but x is on CUDA device 0"):
        _arrays.convert((("x", FakeCudaArray((2,)), False), ("y", FakeCudaArray((2,), device_id=1), False)))


# --- __cuda_array_interface__


class FakeCai:
    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000001000, readonly=False, stream=None,
                 version=3):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, readonly),
                                         "strides": strides, "version": version}
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream


def test_cai_parsing():
    op = _arrays.from_cai(FakeCai((3, 5), "<f2"), "x")
    assert op.ptr == 0x7F0000001000 and op.shape == (3, 5) and op.strides == (5, 1) and op.dtype == 1
    assert op.framework == "cai" and op.producer_stream is None and not op.readonly
    op = _arrays.from_cai(FakeCai((3, 5), "<i8", strides=(8, 24)), "x")
    assert op.strides == (1, 3) and op.dtype == 8
    for typestr, code in _arrays._TYPESTR.items():
        assert _arrays.from_cai(FakeCai((1,), typestr), "x").dtype == code
    assert _arrays.from_cai(FakeCai((2,), stream=7), "x").producer_stream == 7
    assert _arrays.from_cai(FakeCai((2,), stream=7, version=2), "x").producer_stream is None


def test_cai_errors():
    with pytest.raises(jitune.InvalidArgumentError, match="typestr '<c8'.*bfloat16 only through DLPack"):
        _arrays.from_cai(FakeCai((2,), "<c8"), "x")
    with pytest.raises(jitune.InvalidArgumentError, match="not multiples"):
        _arrays.from_cai(FakeCai((2,), "<f4", strides=(6,)), "x")
    with pytest.raises(jitune.InvalidArgumentError, match="stream 0"):
        _arrays.from_cai(FakeCai((2,), stream=0), "x")
    with pytest.raises(jitune.InvalidArgumentError, match="read-only"):
        _arrays.convert((("out", FakeCai((2,), readonly=True), True),))


# --- Checks ops make before any kernel (no GPU reached)


def test_non_contiguous_inputs_are_refused_with_what_to_do():
    x = FakeCai((4, 6), strides=(4, 16))  # a transposed view
    with pytest.raises(jitune.InvalidArgumentError, match=r"x is not contiguous .*\.contiguous\(\)"):
        jitune.sum_rows(x)
    with pytest.raises(jitune.InvalidArgumentError, match="out is not contiguous"):
        jitune.permute(FakeCai((6, 4)), (1, 0), out=x)


def test_shape_and_dtype_mismatches():
    a, b = FakeCai((4, 6)), FakeCai((4, 7))
    with pytest.raises(jitune.InvalidArgumentError, match=r"input shapes \(4, 6\), \(4, 7\) do not broadcast"):
        jitune.elementwise("z = x * y", a, b)
    with pytest.raises(jitune.InvalidArgumentError, match=r"out has shape \(4, 7\).*writes shape \(4, 6\)"):
        jitune.elementwise("z = x * y", a, FakeCai((6,)), out=b)
    with pytest.raises(jitune.InvalidArgumentError, match=r"inputs\[1\] has dtype float16"):
        jitune.elementwise("z = x * y", a, FakeCai((6,), "<f2"))
    with pytest.raises(jitune.InvalidArgumentError, match=r"inputs\[1\] has dtype float16"):
        jitune.elementwise("z = x * y", a, FakeCai((4, 6), "<f2"))
    with pytest.raises(jitune.InvalidArgumentError, match=r"out has shape \(4, 6\) but this op writes shape \(6, 4\)"):
        jitune.permute(a, (1, 0), out=FakeCai((4, 6)))
    with pytest.raises(jitune.InvalidArgumentError, match="out has dtype float16"):
        jitune.permute(a, (1, 0), out=FakeCai((6, 4), "<f2"))
    with pytest.raises(jitune.InvalidArgumentError, match="not a permutation"):
        jitune.permute(a, (0, 0))
    with pytest.raises(jitune.InvalidArgumentError, match="src has 3 rows but index has 2"):
        jitune.index_add(FakeCai((5, 2)), FakeCai((2,), "<i8"), FakeCai((3, 2)))
    with pytest.raises(jitune.InvalidArgumentError, match="index has dtype float32"):
        jitune.index_add(FakeCai((5, 2)), FakeCai((2,)), FakeCai((2, 2)))
    with pytest.raises(jitune.InvalidArgumentError, match="x has dtype float32 but y has float16"):
        jitune.dot(a, FakeCai((4, 6), "<f2"))


def test_an_op_without_a_device_says_why():
    if jitune.device_count() > 0:
        pytest.skip("checks the behaviour without a CUDA device")
    with pytest.raises(jitune.NoDeviceError, match="libcuda|cuInit|device"):
        jitune.sum_rows(FakeCai((4, 6)), out=FakeCai((4,)))
    with pytest.raises(jitune.NoDeviceError):
        jitune.elementwise("z = x * y", FakeCai((8,)), FakeCai((8,)), out=FakeCai((8,)))
    with pytest.raises(jitune.NoDeviceError):  # broadcast and strided: the elementwise_view path
        jitune.elementwise("z = x * y", FakeCai((4, 8), strides=(4, 32)), FakeCai((8,)), out=FakeCai((4, 8)))


# --- Streams


def test_stream_handles():
    class TorchLike:
        cuda_stream = 0x55

    class CupyLike:
        ptr = 0x66

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x77)

    class NumbaLike:
        handle = ctypes.c_void_p(0x88)

    assert _arrays.stream_handle(0) == 0
    assert _arrays.stream_handle(0x1234) == 0x1234
    assert _arrays.stream_handle(TorchLike()) == 0x55
    assert _arrays.stream_handle(CupyLike()) == 0x66
    assert _arrays.stream_handle(Protocol()) == 0x77
    assert _arrays.stream_handle(NumbaLike()) == 0x88
    with pytest.raises(jitune.InvalidArgumentError, match="stream must be"):
        _arrays.stream_handle("default")


def test_contiguity_rules():
    assert _arrays.is_contiguous((2, 3), (3, 1))
    assert _arrays.is_contiguous((2, 1, 3), (3, 99, 1))  # size-1 dims do not matter
    assert _arrays.is_contiguous((0, 3), (7, 7))
    assert not _arrays.is_contiguous((2, 3), (1, 2))
    assert _arrays.torch_is_channels_last((2, 3, 4, 5), (60, 1, 15, 3))
    assert not _arrays.torch_is_channels_last((2, 3, 4, 5), (60, 20, 5, 1))
    assert repr(Operand(16, (2,), (1,), 0, 0, "cai", None)).startswith("Operand(ptr=0x10")
