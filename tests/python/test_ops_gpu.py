"""The functional API on a GPU: every op against PyTorch references for float32, float16 and bfloat16 (random
inputs, poisoned outputs, odd sizes, misaligned views), CuPy and JAX arrays, non-default streams, explain and
tune, and the errors for host, non-contiguous and mismatched arrays. Marked gpu: skipped, with the reason "no CUDA
device", where there is none."""
import math

import pytest

import jitune
from jitune import _arrays

pytestmark = pytest.mark.gpu

FLOATS = ("float32", "float16", "bfloat16")
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    return torch


@pytest.fixture(scope="module")
def F(torch):
    import torch.nn.functional as F

    return F


def dt(torch, name):
    return getattr(torch, name)


def rand(torch, shape, dtype="float32", offset=0):
    """Random values in [0.25, 4) with random signs (never zero); offset > 0: a view that starts `offset` elements
    into its allocation, so its pointer is misaligned for vector accesses."""
    n = math.prod(shape)
    base = torch.empty(n + offset, device="cuda").uniform_(0.25, 4.0)
    base *= torch.randint(0, 2, base.shape, device="cuda") * 2 - 1
    return base.to(dt(torch, dtype))[offset:].view(shape)


def poisoned(torch, shape, dtype, offset=0):
    """An output full of NaN (every element jitune must write), optionally misaligned like rand()."""
    n = math.prod(shape)
    return torch.full((n + offset,), float("nan"), device="cuda", dtype=dt(torch, dtype))[offset:].view(shape)


def assert_close(torch, got, want, dtype, scale=None):
    """got (any dtype) against a float64 reference: |got - want| <= tol * (|want| or scale) + tol."""
    tol = TOL[dtype]
    got, want = got.double(), want.double()
    assert not torch.isnan(got).any(), "NaN left in the output"
    bound = tol * (scale if scale is not None else want.abs()) + tol
    err = (got - want).abs()
    assert bool((err <= bound).all()), f"max error {err.max().item()} (dtype {dtype})"


# --- Devices, explain, tune


def test_devices_and_warnings(torch):
    devices = jitune.devices()
    assert len(devices) == torch.cuda.device_count() == jitune.device_count()
    d = devices[0]
    assert d.ordinal == 0 and d.name and d.compute_capability[0] >= 7 and d.sm_count > 0
    assert d.memory_bytes > 2**30 and d.l2_bytes > 0 and d.driver_version >= 12000 and d.nvrtc_version
    assert d.sm_clock_mhz > 0 and d.memory_clock_mhz > 0
    assert d.arch.startswith("sm_")
    assert torch.cuda.get_device_name(0) == d.name
    assert isinstance(jitune.warnings(0), list)


def test_explain_then_tune_then_exact(torch):
    x = rand(torch, (96, 80), "float16")
    why = jitune.explain("permute", x, (1, 0))
    for key in ("family", "signature", "config", "level", "notes"):
        assert key in why
    assert why["family"] == "permute" and why["signature"] == jitune.signature("permute", x, (1, 0))
    result = jitune.tune("permute", x, (1, 0), budget=3)
    assert result.config and result.best_us > 0 and result.candidates >= 1 and result.stored
    assert result.signature == why["signature"] and result.family == "permute" and result.device == 0
    assert jitune.explain("permute", x, (1, 0))["level"] == "exact"
    # A placeholder explains the same problem.
    assert jitune.explain("permute", jitune.ShapeDtype((96, 80), "float16"), (1, 0))["level"] == "exact"
    results = jitune.tune([("sum_rows", (jitune.ShapeDtype((64, 64), "float32"),)),
                           ("dot", (x.flatten(), x.flatten()), {})], budget=2)
    assert [r.op for r in results] == ["sum_rows", "dot"] and all(r.config for r in results)


# --- Ops against PyTorch


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n, offset", [(1, 0), (1000003, 1), (4096, 3)])
def test_elementwise(torch, dtype, n, offset):
    x, y = rand(torch, (n,), dtype, offset), rand(torch, (n,), dtype)
    out = poisoned(torch, (n,), dtype, offset)
    assert jitune.elementwise("z = x * y + 1", x, y, out=out) is out
    assert_close(torch, out, x.double() * y.double() + 1, dtype)
    z = jitune.elementwise("w = b > 0 ? a : -a", y, x)  # inputs in order of first appearance: b, then a
    assert z.dtype == x.dtype and z.shape == x.shape
    assert_close(torch, z, torch.where(y > 0, x, -x).double(), dtype)


@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16", "int64", "uint8", "int8"))
@pytest.mark.parametrize("shape, perm", [((33, 65), (1, 0)), ((3, 5, 7, 9), (2, 0, 3, 1)), ((2, 1, 17), (2, 1, 0))])
def test_permute(torch, dtype, shape, perm):
    x = torch.randint(0, 100, (math.prod(shape) + 1,), device="cuda").to(dt(torch, dtype))[1:].view(shape)
    want = x.permute(perm).contiguous()
    assert torch.equal(jitune.permute(x, perm), want)
    out = torch.empty_like(want)
    jitune.permute(x, perm, out=out)
    assert torch.equal(out, want)


UPSAMPLE = [dict(scale_factor=2), dict(scale_factor=1.5), dict(size=(7, 30)),
            dict(scale_factor=2, mode="nearest-exact"),
            dict(size=(5, 4), mode="nearest-exact")]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("channels_last", (False, True))
@pytest.mark.parametrize("kw", UPSAMPLE)
def test_upsample_nearest2d_forward_and_backward(torch, F, dtype, channels_last, kw):
    x = rand(torch, (2, 3, 9, 13), dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = jitune.upsample_nearest2d(x, **kw)
    want = F.interpolate(x, **kw)
    assert torch.equal(y, want)
    assert y.is_contiguous(memory_format=torch.channels_last) == channels_last
    out = poisoned(torch, tuple(want.shape), dtype)
    if channels_last:
        out = out.contiguous(memory_format=torch.channels_last)
    jitune.upsample_nearest2d(x, out=out, **kw)
    assert torch.equal(out, want)
    # Backward against autograd through F.interpolate.
    xr = x.detach().requires_grad_()
    go = rand(torch, tuple(want.shape), dtype)
    if channels_last:
        go = go.contiguous(memory_format=torch.channels_last)
    (gi_want,) = torch.autograd.grad(F.interpolate(xr, **kw), xr, go)
    gi = jitune.upsample_nearest2d_backward(go, tuple(x.shape), **kw)
    assert gi.shape == x.shape
    assert_close(torch, gi, gi_want, dtype, scale=gi_want.abs().max().item())


@pytest.mark.parametrize("dtype", FLOATS)
def test_upsample_nearest2d_explicit_nhwc(torch, F, dtype):
    x = rand(torch, (2, 6, 5, 3), dtype)  # (N, H, W, C) contiguous
    y = jitune.upsample_nearest2d(x, scale_factor=2, layout="nhwc")
    want = F.interpolate(x.permute(0, 3, 1, 2), scale_factor=2).permute(0, 2, 3, 1)
    assert y.shape == (2, 12, 10, 3) and y.is_contiguous() and torch.equal(y, want)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("index_dtype", ("int32", "int64"))
@pytest.mark.parametrize("rows, count, row_length", [(1000, 5000, 33), (7, 3, 1), (64, 4099, 8)])
def test_index_add(torch, dtype, index_dtype, rows, count, row_length):
    dst = rand(torch, (rows, row_length), dtype)
    src = rand(torch, (count, row_length), dtype, offset=1)
    index = torch.randint(0, rows, (count,), device="cuda", dtype=dt(torch, index_dtype))
    want = dst.double().index_add(0, index.long(), src.double(), alpha=0.5)
    per_row = torch.bincount(index.long(), minlength=rows).max().item() + 1
    assert jitune.index_add(dst, index, src, alpha=0.5) is dst
    assert_close(torch, dst, want, dtype, scale=4.0 * per_row)


@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_add_and_checked_indices(torch, dtype):
    dst = rand(torch, (1001,), dtype)
    src = rand(torch, (4000,), dtype)
    index = torch.randint(0, 1001, (3001,), device="cuda")
    want = dst.double().index_add(0, index, src[:3001].double())
    jitune.scatter_add(dst, index, src)
    per_row = torch.bincount(index, minlength=1001).max().item() + 1
    assert_close(torch, dst, want, dtype, scale=4.0 * per_row)
    index[17] = 5000
    with pytest.raises(jitune.InvalidArgumentError, match="5000"):
        jitune.scatter_add(dst, index, src, check_indices=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n, offset", [(1, 0), (1000003, 1), (65536, 0)])
def test_dot(torch, dtype, n, offset):
    x, y = rand(torch, (n,), dtype, offset), rand(torch, (n,), dtype)
    got = jitune.dot(x, y)
    assert got.shape == () and got.dtype == x.dtype
    want = (x.double() * y.double()).sum()
    assert_close(torch, got, want, dtype, scale=(x.double() * y.double()).abs().sum().item() / math.sqrt(n))
    out = poisoned(torch, (1,), dtype)
    jitune.dot(x, y, out=out)
    assert_close(torch, out[0], want, dtype, scale=(x.double() * y.double()).abs().sum().item() / math.sqrt(n))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("geometry", [dict(), dict(stride=2, padding=1), dict(padding=(2, 0), dilation=(1, 2))])
@pytest.mark.parametrize("bias", (False, True))
def test_conv2d(torch, F, dtype, geometry, bias):
    x = rand(torch, (2, 5, 17, 19), dtype)
    w = rand(torch, (7, 5, 3, 3), dtype)
    b = rand(torch, (7,), dtype) if bias else None
    y = jitune.conv2d(x, w, b, **geometry)
    want = F.conv2d(x.double(), w.double(), b.double() if bias else None, **geometry)
    assert y.shape == want.shape and y.dtype == x.dtype
    scale = F.conv2d(x.double().abs(), w.double().abs(), None, **geometry).max().item()
    assert_close(torch, y, want, dtype, scale=scale)


def test_conv2d_epilogue_with_a_residual(torch, F):
    """The framework-neutral op: epilogue and residual in one call, the residual checked against the output."""
    x, w, b = (torch.randn(*s, device="cuda", dtype=torch.float16) for s in ((2, 8, 12, 13), (16, 8, 3, 3), (16,)))
    r = torch.randn(2, 16, 12, 13, device="cuda", dtype=torch.float16)
    conv = F.conv2d(x.double(), w.double(), b.double(), padding=1).half()
    y = jitune.conv2d(x, w, b, padding=1, epilogue="y = max(acc + r, 0.0f)", residual=r)
    scale = F.conv2d(x.double().abs(), w.double().abs(), None, padding=1).max().item()
    torch.testing.assert_close(y.float(), torch.relu(conv.float() + r.float()), rtol=0, atol=4e-3 * scale)
    with pytest.raises(jitune.InvalidArgumentError, match="residual has shape"):
        jitune.conv2d(x, w, b, padding=1, epilogue="y = acc + r", residual=torch.zeros(2, 8, 12, 13, device="cuda", dtype=torch.float16))
    with pytest.raises(jitune.InvalidArgumentError, match="epilogue is int"):
        jitune.conv2d(x, w, b, padding=1, epilogue=3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv2d_nhwc(torch, F, dtype):
    """layout="nhwc": arrays stored (N, H, W, C), (K, R, S, C), result (N, P, Q, K); a bad layout is a clear error."""
    x = rand(torch, (2, 16, 17, 19), dtype)
    w = rand(torch, (7, 16, 3, 3), dtype)
    xs, ws = x.permute(0, 2, 3, 1).contiguous(), w.permute(0, 2, 3, 1).contiguous()
    y = jitune.conv2d(xs, ws, stride=2, padding=1, layout="nhwc")
    want = F.conv2d(x.double(), w.double(), stride=2, padding=1).permute(0, 2, 3, 1)
    assert y.shape == want.shape and y.dtype == x.dtype
    scale = F.conv2d(x.double().abs(), w.double().abs(), stride=2, padding=1).max().item()
    assert_close(torch, y, want, dtype, scale=scale)
    with pytest.raises(jitune.InvalidArgumentError, match="'nchw' or 'nhwc'"):
        jitune.conv2d(xs, ws, layout="chwn")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, offset", [((1, 1), 0), ((7, 4097), 1), ((3, 5, 33), 3), ((70000,), 0)])
def test_reduce_rows(torch, dtype, shape, offset):
    x = rand(torch, shape, dtype, offset)
    s = jitune.sum_rows(x)
    assert s.shape == shape[:-1] and s.dtype == x.dtype
    assert_close(torch, s, x.double().sum(-1), dtype, scale=x.double().abs().sum(-1).max().item())
    m = jitune.reduce_rows(x, "max", out=poisoned(torch, shape[:-1], dtype))
    assert torch.equal(m, torch.amax(x, -1))
    assert torch.equal(jitune.max_rows(x), torch.amax(x, -1))


# --- Streams


def test_the_default_stream_is_torchs_current_one(torch):
    x = rand(torch, (512, 256))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        (_,), _, stream, framework = _arrays.convert((("x", x, False),))
        assert framework == "torch" and stream == s.cuda_stream
        y = jitune.sum_rows(x)  # on s
    s.synchronize()
    assert_close(torch, y, x.double().sum(-1), "float32", scale=x.abs().sum(-1).max().item())


def test_explicit_streams(torch):
    s = torch.cuda.Stream()
    x = rand(torch, (1 << 20,))
    s.wait_stream(torch.cuda.current_stream())
    for stream in (s, s.cuda_stream):
        out = poisoned(torch, (1 << 20,), "float32")
        s.wait_stream(torch.cuda.current_stream())
        jitune.elementwise("y = 2 * x", x, out=out, stream=stream)
        s.synchronize()
        assert torch.equal(out, 2 * x)


class CaiView:
    """A tensor seen only through __cuda_array_interface__ v3, with the stream its data is being written on."""

    def __init__(self, t, stream):
        self.__cuda_array_interface__ = {"shape": tuple(t.shape), "typestr": "<f4", "data": (t.data_ptr(), False),
                                         "strides": None, "version": 3, "stream": stream.cuda_stream}


class DlpackView:
    """A tensor seen only through DLPack (so jitune hands its stream to the producer)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kw):
        return self.t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_producer_streams_are_waited_for(torch):
    # The producer is still writing x (behind a sleep) when jitune's op is queued on another stream: without the
    # wait the op would read zeros.
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    for make_view in (lambda t: CaiView(t, producer), DlpackView):
        x = torch.zeros(1 << 20, device="cuda")
        out = torch.full_like(x, float("nan"))
        torch.cuda.synchronize()
        with torch.cuda.stream(producer):
            torch.cuda._sleep(100_000_000)
            x.fill_(3.0)
            view = make_view(x)  # DLPack: the producer's current stream is this one
            jitune.elementwise("y = x + 1", view, out=out, stream=consumer)
        consumer.synchronize()
        assert bool((out == 4).all())


def test_elementwise_over_views_and_broadcasts(torch):
    """Through DLPack: transposed, sliced and broadcast inputs and a strided out=, one elementwise_view kernel."""
    x, y = rand(torch, (300, 200)), rand(torch, (200, 300))
    got = jitune.elementwise("z = a * b", x.t(), y)
    torch.testing.assert_close(got, x.t() * y)
    assert got.is_contiguous()
    bias = rand(torch, (300,))
    torch.testing.assert_close(jitune.elementwise("z = a + b", y, bias), y + bias)
    wide = rand(torch, (200, 600))
    out = torch.full_like(wide, float("nan"))
    jitune.elementwise("z = a - b", y, bias, out=out[:, ::2])  # every other column of out
    torch.testing.assert_close(out[:, ::2], y - bias)
    assert bool(out[:, 1::2].isnan().all())  # the other columns untouched


# --- Errors


def test_host_non_contiguous_and_mismatched_tensors(torch):
    with pytest.raises(jitune.InvalidArgumentError, match=r"x is in host memory \(device type CPU\)"):
        jitune.permute(torch.zeros(4, 4), (1, 0))
    x = rand(torch, (8, 6))
    with pytest.raises(jitune.InvalidArgumentError, match=r"x is not contiguous.*\.contiguous\(\)"):
        jitune.sum_rows(x.t())
    with pytest.raises(jitune.InvalidArgumentError, match="x has dtype float32 but y has float16"):
        jitune.dot(x.flatten(), x.flatten().half())
    with pytest.raises(jitune.InvalidArgumentError, match="out has shape"):
        jitune.permute(x, (1, 0), out=torch.empty_like(x))
    with pytest.raises(jitune.InvalidArgumentError, match="float32, float16 or bfloat16"):
        jitune.sum_rows(x.long())
    with pytest.raises(jitune.InvalidArgumentError, match=r"(?s)invalid elementwise expression.*\^"):
        jitune.elementwise("y = x +* 2", x)
    with pytest.raises(jitune.CompileError) as info:
        jitune.elementwise("y = no_such_function(x)", x)
    assert "no_such_function" in str(info.value) and info.value.status == 4


def test_arrays_of_two_devices(torch):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    x, y = rand(torch, (64,)), rand(torch, (64,)).to("cuda:1")
    with pytest.raises(jitune.InvalidArgumentError, match="CUDA device 1 but x is on CUDA device 0"):
        jitune.dot(x, y)
    z = rand(torch, (64,)).to("cuda:1")
    assert_close(torch, jitune.dot(y, z).cpu(), (y.double() * z.double()).sum().cpu(), "float32", scale=64.0)


# --- CuPy and JAX


@pytest.fixture(scope="module")
def cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001
        pytest.skip("CuPy sees no CUDA device")
    return cupy


def test_cupy_arrays(cupy):
    x = cupy.random.uniform(0.25, 4.0, (37, 130)).astype(cupy.float16)
    y = jitune.permute(x, (1, 0))
    assert isinstance(y, cupy.ndarray) and y.dtype == cupy.float16
    assert bool((y == x.T).all())
    z = jitune.elementwise("z = a * b", x, x)
    assert bool(cupy.allclose(z.astype(cupy.float64), x.astype(cupy.float64) ** 2, rtol=2e-3))
    s = jitune.sum_rows(x.astype(cupy.float32)[1:])  # a misaligned view
    assert bool(cupy.allclose(s, x.astype(cupy.float32)[1:].sum(-1), rtol=1e-5))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        (_,), _, handle, framework = _arrays.convert((("x", x, False),))
        assert framework == "cupy" and handle == stream.ptr
        y2 = jitune.permute(x, (1, 0))
    stream.synchronize()
    assert bool((y2 == x.T).all())


def test_cupy_bfloat16_output_needs_out(cupy, torch):
    # CuPy has no bfloat16: an output for a bfloat16 computation comes from torch (out=).
    x = torch.ones(16, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(16, device="cuda", dtype=torch.bfloat16)
    jitune.elementwise("y = x + 1", x, out=out)
    assert bool((out == 2).all())


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    try:
        jax.devices("gpu")
    except RuntimeError:
        pytest.skip("JAX has no GPU backend here")
    return jax


def test_jax_arrays(jax):
    import jax.numpy as jnp

    gpu = jax.devices("gpu")[0]
    x = jax.device_put(jnp.arange(6 * 7 * 5, dtype=jnp.float32).reshape(6, 7, 5), gpu)
    y = jitune.permute(x, (2, 0, 1))
    assert isinstance(y, jax.Array) and y.shape == (5, 6, 7)
    assert bool((y == jnp.transpose(x, (2, 0, 1))).all())
    xb = x.astype(jnp.bfloat16)  # bfloat16 through DLPack
    s = jitune.sum_rows(xb)
    assert s.dtype == jnp.bfloat16 and bool(jnp.allclose(s.astype(jnp.float32), xb.astype(jnp.float32).sum(-1),
                                                              rtol=1.6e-2))
    img = jax.device_put(jnp.ones((2, 4, 4, 3), jnp.float16), gpu)
    up = jitune.upsample_nearest2d(img, scale_factor=2, layout="nhwc")
    assert up.shape == (2, 8, 8, 3) and bool((up == 1).all())
    with pytest.raises(jitune.InvalidArgumentError, match="immutable"):
        jitune.permute(x, (2, 0, 1), out=y)
    with pytest.raises(jitune.InvalidArgumentError, match="immutable"):
        jitune.scatter_add(x.flatten(), jnp.zeros(3, jnp.int32), x.flatten())
