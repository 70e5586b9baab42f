"""jitune.torch on the GPU: every op against PyTorch for each dtype it takes (random inputs, odd sizes,
misaligned views), gradients against PyTorch's, torch.library.opcheck, torch.compile(fullgraph=True), CUDA graph
capture and replay, non-default streams. Skipped, visibly, without a CUDA device."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: jitune.torch GPU tests skipped", allow_module_level=True)
import torch.nn.functional as F  # noqa: E402

import jitune  # noqa: E402
import jitune.torch as jt  # noqa: E402

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}


def rand(*shape, dtype=torch.float32, offset=0):
    """Fresh random values in [0.25, 4) with random signs, never zero; offset > 0 gives a view that starts
    `offset` elements into its allocation (a misaligned pointer)."""
    n = 1
    for s in shape:
        n *= s
    base = torch.empty(n + offset, device="cuda").uniform_(0.25, 4.0)
    base *= torch.randint(0, 2, base.shape, device="cuda") * 2 - 1
    return base.to(dtype)[offset:].view(shape)


def _unit(dtype):
    return {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[dtype]


def close(got, want, dtype=None):
    rtol, atol = TOL[dtype or want.dtype]
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n, offset", [(1, 0), (1000003, 1), (4096, 3)])
def test_elementwise(dtype, n, offset):
    x, y, w = rand(n, dtype=dtype, offset=offset), rand(n, dtype=dtype), rand(n, dtype=dtype, offset=offset)
    close(jt.elementwise("z = x * y + w", x, y, w), (x.float() * y.float() + w.float()).to(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_elementwise_over_views_and_broadcasts(dtype):
    """Broadcast, permuted, sliced and expanded inputs: one elementwise_view kernel, the same values as PyTorch."""
    x = rand(4, 300, 200, dtype=dtype)
    s, b = rand(dtype=dtype), rand(300, dtype=dtype)
    got, want = jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b), x.permute(0, 2, 1) * s + b
    close(got, want)
    assert got.stride() == want.stride() == (60000, 1, 200)  # PyTorch's layout: x's memory order, no transpose
    a = rand(257, 130, dtype=dtype)
    c = rand(257, 129, dtype=dtype)
    close(jt.elementwise("y = a * c", a[:, 1:], c), a[:, 1:] * c)
    m, row, col = rand(300, 1001, dtype=dtype), rand(1001, dtype=dtype), rand(300, 1, dtype=dtype)
    close(jt.elementwise("y = m * r + c", m, row, col), m * row + col)
    e = rand(1, 77, dtype=dtype).expand(50, 77)
    close(jt.elementwise("y = e - m", e, m[:50, :77]), e - m[:50, :77])
    assert jt.elementwise("y = x + 1", rand(0, 5, dtype=dtype)).shape == (0, 5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_elementwise_into_a_given_view(dtype):
    """out= takes any non-overlapping view of the broadcast shape: a contiguous out makes the permuted chain one
    transposing pass; a misaligned out (one element into its allocation), a permuted out, and under torch.compile
    (the op declares out written). Poisoned outputs first; an overlapping out gets a clear error."""
    x = rand(3, 260, 130, dtype=dtype)
    s, b = rand(dtype=dtype), rand(260, dtype=dtype)
    want = x.permute(0, 2, 1) * s + b
    for out in (torch.empty(3, 130, 260, device="cuda", dtype=dtype),
                torch.empty(3 * 130 * 260 + 1, device="cuda", dtype=dtype)[1:].view(3, 130, 260),
                torch.empty(260, 3, 130, device="cuda", dtype=dtype).permute(1, 2, 0)):
        out.fill_(float("nan"))
        assert jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b, out=out) is out
        close(out, want)
    compiled = torch.compile(lambda a, c, d, o: jt.elementwise("y = x * s + b", a.permute(0, 2, 1), c, d, out=o),
                             fullgraph=True)
    out = torch.full((3, 130, 260), float("nan"), device="cuda", dtype=dtype)
    compiled(x, s, b, out)
    close(out, want)
    with pytest.raises(jitune.InvalidArgumentError, match="overlap|share memory"):
        jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b,
                       out=torch.empty(3, 1, 260, device="cuda", dtype=dtype).expand(3, 130, 260))
    square = rand(64, 64, dtype=dtype)
    with pytest.raises(jitune.InvalidArgumentError, match="overlaps"):  # reading a transposed self while writing
        jt.elementwise("y = x + 1", square.t(), out=square)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int64, torch.uint8))
@pytest.mark.parametrize("shape, perm", [((33, 65), (1, 0)), ((3, 5, 7, 9), (2, 0, 3, 1)), ((2, 1, 17), (2, 1, 0))])
def test_permute_is_exact(dtype, shape, perm):
    x = (torch.rand(shape, device="cuda") * 200).to(dtype)
    assert torch.equal(jt.permute(x, perm), x.permute(perm).contiguous())
    strided = x.transpose(0, -1)  # not contiguous: made contiguous first
    assert torch.equal(jt.permute(strided, perm), strided.permute(perm).contiguous())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("channels_last", (False, True))
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(scale_factor=1.5), dict(size=(7, 30)),
                                dict(scale_factor=2, mode="nearest-exact")])
def test_upsample_forward_matches_torch_bit_for_bit(dtype, channels_last, kw):
    x = rand(2, 5, 9, 11, dtype=dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    got = jt.upsample_nearest2d(x, **kw)
    want = F.interpolate(x, **{"mode": "nearest", **kw})
    assert torch.equal(got, want)
    assert got.is_contiguous(memory_format=torch.channels_last) == channels_last


@pytest.mark.parametrize("dtype", FLOATS)
def test_upsample_gradient_is_jitunes_backward(dtype):
    x = rand(2, 3, 6, 5, dtype=dtype).requires_grad_()
    y = jt.upsample_nearest2d(x, scale_factor=3)
    g = rand(*y.shape, dtype=dtype)
    (gx,) = torch.autograd.grad(y, x, g)
    xr = x.detach().float().requires_grad_()
    (want,) = torch.autograd.grad(F.interpolate(xr, scale_factor=3, mode="nearest"), xr, g.float())
    close(gx, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("index_dtype", (torch.int32, torch.int64))
def test_index_add_and_its_gradient(dtype, index_dtype):
    rows, count, width = 37, 301, 5
    dst, src = rand(rows, width, dtype=dtype), rand(count, width, dtype=dtype)
    index = torch.randint(0, rows, (count,), device="cuda", dtype=index_dtype)
    want = dst.double().index_add(0, index.long(), src.double(), alpha=0.5)
    # Atomic adds in dtype round after every addition, in any order: the classic bound of a sum of k terms,
    # k * u * (sum of their magnitudes), per destination element.
    k = int(torch.bincount(index.long(), minlength=rows).max()) + 1
    bound = dst.double().abs().index_add(0, index.long(), src.double().abs(), alpha=0.5) * k * _unit(dtype)
    for got in (jt.index_add(dst, index, src, alpha=0.5), jt.index_add_(dst.clone(), index, src, alpha=0.5)):
        assert bool(((got.double() - want).abs() <= bound + _unit(dtype) * want.abs()).all())
    d, s = dst.clone().requires_grad_(), src.clone().requires_grad_()
    g = rand(rows, width, dtype=dtype)
    gd, gs = torch.autograd.grad(jt.index_add(d, index, s, alpha=0.5), (d, s), g)
    assert torch.equal(gd, g)
    close(gs, (g.index_select(0, index.long()) * 0.5), dtype)


def test_scatter_add_and_bad_indices():
    dst, src = rand(100), rand(300)
    index = torch.randint(0, 100, (250,), device="cuda")
    want = dst.double().scatter_add(0, index, src[:250].double())
    close(jt.scatter_add(dst, index, src), want.float())
    bad = index.clone()
    bad[17] = 100
    with pytest.raises(jitune.InvalidArgumentError, match="100"):
        jt.scatter_add(dst, bad, src, check_indices=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_dot_and_its_gradient(dtype):
    x, y = rand(10007, dtype=dtype).requires_grad_(), rand(10007, dtype=dtype).requires_grad_()
    out = jt.dot(x, y)
    assert out.shape == () and out.dtype == dtype
    want = torch.dot(x.double(), y.double())
    assert abs(out.double() - want) <= 1e-2 * abs(want) + 1.0
    gx, gy = torch.autograd.grad(out, (x, y))
    assert torch.equal(gx, y.detach()) and torch.equal(gy, x.detach())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("geometry", [dict(), dict(stride=2, padding=1), dict(padding=(2, 0), dilation=(1, 2))])
def test_conv2d_and_its_gradients(dtype, geometry):
    x = rand(2, 3, 17, 19, dtype=dtype).requires_grad_()
    w = (rand(4, 3, 3, 3, dtype=dtype) * 0.1).requires_grad_()
    b = rand(4, dtype=dtype).requires_grad_()
    y = jt.conv2d(x, w, b, **geometry)
    want = F.conv2d(x.double(), w.double(), b.double(), **geometry)
    torch.testing.assert_close(y.double(), want, rtol=TOL[dtype][0] * 10, atol=TOL[dtype][1] * 27)
    g = rand(*y.shape, dtype=dtype)
    got = torch.autograd.grad(y, (x, w, b), g)
    ref = torch.autograd.grad(want, (x, w, b), g.double())
    for a, r in zip(got, ref):
        torch.testing.assert_close(a.double(), r.double(), rtol=5e-2, atol=5e-2 * 27)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("channels", [16, 13])
def test_conv2d_channels_last(dtype, channels):
    """A channels_last input runs jitune's NHWC kernel (float16 / bfloat16) and gives a channels_last output, as
    F.conv2d does; float32 runs NCHW (a copy) with the same values; the weight may be in either format; under
    torch.compile the fake output has the real strides."""
    x = rand(3, channels, 21, 18, dtype=dtype).contiguous(memory_format=torch.channels_last)
    w = rand(24, channels, 3, 3, dtype=dtype) * 0.1
    b = rand(24, dtype=dtype)
    want = F.conv2d(x.double(), w.double(), b.double(), stride=(1, 2), padding=1)
    for weight in (w, w.contiguous(memory_format=torch.channels_last)):
        y = jt.conv2d(x, weight, b, stride=(1, 2), padding=1)
        torch.testing.assert_close(y.double(), want, rtol=TOL[dtype][0] * 10, atol=TOL[dtype][1] * 9 * channels)
        assert y.is_contiguous(memory_format=torch.channels_last) == (dtype != torch.float32)
    compiled = torch.compile(lambda a, c: jt.conv2d(a, c, b, stride=(1, 2), padding=1), fullgraph=True)
    y = compiled(x, w)
    torch.testing.assert_close(y.double(), want, rtol=TOL[dtype][0] * 10, atol=TOL[dtype][1] * 9 * channels)
    assert y.is_contiguous(memory_format=torch.channels_last) == (dtype != torch.float32)


@pytest.mark.parametrize("filt,stride", [(3, 1), (5, 1), (3, 2)])
def test_conv2d_channels_last_float32(filt, stride):
    """float32 channels_last: a 3x3 of stride 1 runs jitune's Winograd kernel on the NHWC tensors and returns a
    channels_last output, as F.conv2d does; other filters and strides run NCHW (a copy) with the same values. The
    fake output under torch.compile has the real strides."""
    x = rand(2, 37, 19, 22).contiguous(memory_format=torch.channels_last)
    w = (rand(29, 37, filt, filt) * 0.1).contiguous(memory_format=torch.channels_last)
    b = rand(29)
    want = F.conv2d(x.double(), w.double(), b.double(), stride=stride, padding=1)
    nhwc = filt == 3 and stride == 1
    y = jt.conv2d(x, w, b, stride=stride, padding=1)
    torch.testing.assert_close(y.double(), want, rtol=1e-4, atol=1e-5 * 37 * filt * filt)
    assert y.is_contiguous(memory_format=torch.channels_last) == nhwc
    compiled = torch.compile(lambda a, c: jt.conv2d(a, c, b, stride=stride, padding=1), fullgraph=True)
    y = compiled(x, w)
    torch.testing.assert_close(y.double(), want, rtol=1e-4, atol=1e-5 * 37 * filt * filt)
    assert y.is_contiguous(memory_format=torch.channels_last) == nhwc


@pytest.mark.parametrize("channels_last", [False, True])
def test_conv2d_tf32_is_an_opt_in(channels_last):
    """precision="tf32": a float32 convolution runs on TF32 tensor cores, within TF32's bound and visibly not exact;
    channels_last stays channels_last for any filter (the TF32 NHWC kernel); the default stays exact. Eager and
    under torch.compile."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = rand(2, 64, 21, 22).contiguous(memory_format=fmt)
    w = (rand(48, 64, 3, 3) * 0.1).contiguous(memory_format=fmt)
    b = rand(48)
    want = F.conv2d(x.double(), w.double(), b.double(), stride=2, padding=1)
    scale = F.conv2d(x.double().abs(), w.double().abs(), None, stride=2, padding=1).max().item()
    exact = jt.conv2d(x, w, b, stride=2, padding=1)
    tf32 = jt.conv2d(x, w, b, stride=2, padding=1, precision="tf32")
    exact_err = (exact.double() - want).abs().max().item()
    tf32_err = (tf32.double() - want).abs().max().item()
    assert exact_err < 1e-5 * scale
    assert tf32_err < 2.0 ** -9 * scale  # each input truncated to 10 mantissa bits
    assert tf32_err > 4 * exact_err  # it did run on TF32
    assert tf32.is_contiguous(memory_format=torch.channels_last) == channels_last
    compiled = torch.compile(lambda a, c: jt.conv2d(a, c, b, stride=2, padding=1, precision="tf32"), fullgraph=True)
    got = compiled(x, w)
    assert (got.double() - want).abs().max().item() < 2.0 ** -9 * scale
    assert got.is_contiguous(memory_format=torch.channels_last) == channels_last
    with pytest.raises(jitune.InvalidArgumentError, match="precision 'fast'"):
        jt.conv2d(x, w, b, precision="fast")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv2d_fused_epilogue_is_one_call_of_the_chain(dtype, channels_last):
    """relu(conv2d(x, w, b) + r) in one kernel, against PyTorch's chain on the same tensors (the convolution's
    output rounded to the dtype, then the expression in float and one rounding, as the unfused ops do); a
    misaligned residual view; no derivative; under torch.compile too."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = rand(2, 16, 19, 23, dtype=dtype).contiguous(memory_format=fmt)
    w = rand(32, 16, 3, 3, dtype=dtype) * 0.1
    b = rand(32, dtype=dtype)
    conv = F.conv2d(x.double(), w.double(), b.double(), padding=1).to(dtype)
    storage = rand(conv.numel() + 1, dtype=dtype)
    r = storage[1:].view(conv.shape).contiguous(memory_format=fmt) if channels_last else storage[1:].view(conv.shape)
    want = torch.relu(conv.float() + r.float()).to(dtype)
    scale = F.conv2d(x.double().abs(), w.double().abs(), b.double().abs(), padding=1).max().item()
    tol = TOL[dtype][0] * 4 * scale  # one unit of the convolution's rounding, which the residual does not cancel
    y = jt.conv2d(x, w, b, padding=1, epilogue="y = max(acc + r, 0.0f)", residual=r)
    assert y.shape == want.shape and y.dtype == dtype
    torch.testing.assert_close(y.float(), want.float(), rtol=0, atol=tol)
    assert (y == 0).float().mean().item() > 0.2  # the relu clamps a good share
    relu = jt.conv2d(x, w, b, padding=1, epilogue="y = max(acc, 0.0f)")
    torch.testing.assert_close(relu.float(), torch.relu(conv.float()), rtol=0, atol=tol)
    compiled = torch.compile(lambda a, c, d: jt.conv2d(a, c, b, padding=1, epilogue="y = max(acc + r, 0.0f)",
                                                        residual=d), fullgraph=True)
    torch.testing.assert_close(compiled(x, w, r).float(), want.float(), rtol=0, atol=tol)
    with pytest.raises(Exception, match="residual"):
        jt.conv2d(x, w, b, padding=1, epilogue="y = max(acc + r, 0.0f)")
    with pytest.raises(Exception, match="reads 'q'"):
        jt.conv2d(x, w, b, padding=1, epilogue="y = acc + q")
    xg = x.detach().clone().requires_grad_()
    out = jt.conv2d(xg, w, b, padding=1, epilogue="y = max(acc, 0.0f)")
    with pytest.raises(RuntimeError, match="no derivative"):
        out.sum().backward()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (7, 4097), (3, 5, 33), (70000,)])
def test_sum_and_amax_rows_and_gradients(dtype, shape):
    x = rand(*shape, dtype=dtype).requires_grad_()
    s, m = jt.sum_rows(x), jt.amax_rows(x)
    torch.testing.assert_close(s.double(), x.double().sum(-1), rtol=TOL[dtype][0] * 4,
                               atol=shape[-1] * 2.0 ** -18)
    assert torch.equal(m, torch.amax(x, -1))
    g = rand(*s.shape, dtype=dtype)
    (gs,) = torch.autograd.grad(s, x, g)
    assert torch.equal(gs, g.unsqueeze(-1).expand(shape))
    (gm,) = torch.autograd.grad(m, x, g)
    (want,) = torch.autograd.grad(torch.amax(x, -1), x, g)
    close(gm, want, dtype)


def test_permute_gradient_is_the_inverse_permute():
    x = rand(3, 4, 5).requires_grad_()
    y = jt.permute(x, (2, 0, 1))
    g = rand(*y.shape)
    (gx,) = torch.autograd.grad(y, x, g)
    assert torch.equal(gx, g.permute(1, 2, 0))


def opcheck_cases():
    x = rand(2, 3, 9, 10)
    index = torch.randint(0, 6, (11,), device="cuda")
    return [
        ("elementwise", ("z = x * y - 1", [rand(301), rand(301)])),
        ("permute", (rand(3, 4, 5).requires_grad_(), [1, 2, 0])),
        ("upsample_nearest2d", (x.requires_grad_(), [18, 20], 2.0, 2.0, False)),
        ("upsample_nearest2d", (rand(2, 3, 9, 10).contiguous(memory_format=torch.channels_last), [5, 7])),
        ("upsample_nearest2d_backward", (rand(2, 3, 18, 20), [2, 3, 9, 10], [18, 20], 2.0, 2.0, False)),
        ("index_add", (rand(6, 4).requires_grad_(), index, rand(11, 4).requires_grad_(), 1.5)),
        ("index_add_", (rand(6, 4), index, rand(11, 4))),
        ("scatter_add", (rand(6).requires_grad_(), index, rand(11).requires_grad_())),
        ("scatter_add_", (rand(6), index, rand(13), 0.5)),
        ("dot", (rand(77).requires_grad_(), rand(77).requires_grad_())),
        ("conv2d", (rand(1, 2, 8, 9).requires_grad_(), rand(3, 2, 3, 3).requires_grad_(), rand(3), [1, 1],
                    [1, 1], [1, 1])),
        ("conv2d", (rand(1, 2, 8, 9), rand(3, 2, 3, 3), None, [2, 1], [0, 1], [1, 2])),
        ("conv2d_fused", (rand(1, 2, 8, 9), rand(3, 2, 3, 3), rand(3), [1, 1], [1, 1], [1, 1], "y = max(acc + r, 0.0f)",
                          rand(1, 3, 8, 9))),
        ("reduce_rows", (rand(5, 300).requires_grad_(), "sum")),
        ("reduce_rows", (rand(5, 300).requires_grad_(), "max")),
    ]


@pytest.mark.parametrize("name, args", opcheck_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    op = getattr(torch.ops.jitune, name).default
    torch.library.opcheck(op, args)


class TinyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(rand(8, 4, 3, 3) * 0.1)

    def forward(self, x):
        y = jt.conv2d(x, self.weight, padding=1)
        y = jt.upsample_nearest2d(y, scale_factor=2)
        y = jt.elementwise("z = x * 0.5 + y", y, y)
        y = jt.permute(y, (0, 2, 3, 1))
        return jt.sum_rows(y)


@torch.no_grad()  # inference: elementwise has no derivative, so a training graph through it cannot be traced
def test_torch_compile_fullgraph_matches_eager():
    model = TinyModel()
    x = rand(2, 4, 10, 12)
    eager = model(x)
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), eager, rtol=1e-5, atol=1e-4)
    x2 = rand(3, 4, 6, 8)  # new shapes: a recompile, still no graph break
    torch.testing.assert_close(compiled(x2), model(x2), rtol=1e-5, atol=1e-4)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0


def test_torch_compile_of_a_training_graph_through_elementwise_says_why_it_fails():
    model = TinyModel()
    with pytest.raises(Exception, match="has no derivative"):
        torch.compile(model, fullgraph=True)(rand(2, 4, 10, 12)).sum().backward()


def test_torch_compile_trains_through_the_ops():
    x = rand(2, 3, 5, 6).requires_grad_()

    def f(t):
        return jt.sum_rows(jt.permute(jt.upsample_nearest2d(t, scale_factor=2), (0, 2, 1, 3))).sum()

    (g_eager,) = torch.autograd.grad(f(x), x)
    (g_compiled,) = torch.autograd.grad(torch.compile(f, fullgraph=True)(x), x)
    torch.testing.assert_close(g_compiled, g_eager)


def test_cuda_graph_replays_a_warm_op_and_refuses_a_cold_one():
    x, y = rand(4099), rand(4099)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        jt.elementwise("z = x * y + 3", x, y)  # warm-up: compiles and loads the kernel
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = jt.elementwise("z = x * y + 3", x, y)
    for _ in range(3):
        x.copy_(rand(4099))
        y.copy_(rand(4099))
        graph.replay()
        torch.cuda.synchronize()
        close(out, x * y + 3)
    cold = rand(12347)
    graph2 = torch.cuda.CUDAGraph()
    with pytest.raises(jitune.InvalidArgumentError, match="warm"):
        with torch.cuda.graph(graph2):
            jt.elementwise("z = x * y - 7", cold, cold)
    torch.cuda.synchronize()
    # The process and the first graph are still good.
    graph.replay()
    torch.cuda.synchronize()
    close(out, x * y + 3)


def test_ops_run_on_the_current_stream():
    side = torch.cuda.Stream()
    x = rand(1 << 22)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000)  # keeps the side stream busy: a kernel on another stream would race
        y = jt.elementwise("z = x + 1", x)
        s = jt.sum_rows(y.view(1024, -1))
    side.synchronize()
    close(y, x + 1)
    torch.testing.assert_close(s.double(), (x.double() + 1).view(1024, -1).sum(-1), rtol=1e-5, atol=1e-2)


def test_tensors_on_two_devices_or_freed_memory_are_refused():
    x = rand(64)
    with pytest.raises(jitune.InvalidArgumentError, match="convert one"):
        jt.elementwise("z = x + y", x, x.half())
    if torch.cuda.device_count() > 1:
        with pytest.raises(jitune.InvalidArgumentError, match="one CUDA device"):
            jt.elementwise("z = x + y", x, x.to("cuda:1"))


def test_eager_overhead_path_handles_many_shapes():
    # The per-problem argument memo is keyed by shape: many shapes in a row stay correct.
    for n in range(1, 40):
        x = rand(n, 3)
        assert torch.equal(jt.permute(x, (1, 0)), x.t().contiguous())


def test_fast_and_ctypes_paths_agree(monkeypatch):
    """jitune._fast and the ctypes path make the same call: the deterministic ops give bit-identical results both
    ways, the atomic ones (index_add, scatter_add, dot: the order of float additions varies) agree within rounding,
    and all match PyTorch."""
    if jt._F is None:
        pytest.skip("no jitune._fast in this build: ctypes only")
    x, y, w = (rand(1000003, dtype=torch.float16) for _ in range(3))
    m = rand(67, 131)
    img = rand(2, 3, 9, 7, dtype=torch.bfloat16)
    grad = rand(2, 3, 18, 14, dtype=torch.bfloat16)
    dst, src = rand(300, 17), rand(1000, 17)
    idx = torch.randint(0, 300, (1000,), device="cuda")
    flat_dst, flat_src = rand(300), rand(1000)
    xf, yf = x.float(), y.float()

    def run():
        exact = [jt.elementwise("z = x * y + w", x, y, w), jt.permute(m, (1, 0)), jt.sum_rows(m), jt.amax_rows(m),
                 jt.upsample_nearest2d(img, scale_factor=2),
                 jt.upsample_nearest2d_backward(grad, (2, 3, 9, 7), (18, 14), 2.0, 2.0)]
        atomic = [jt.index_add(dst, idx, src), jt.scatter_add(flat_dst, idx, flat_src), jt.dot(xf, yf)]
        return exact, atomic

    fast = run()
    monkeypatch.setattr(jt, "_F", None)
    slow = run()
    for i, (a, b) in enumerate(zip(fast[0], slow[0])):
        assert torch.equal(a, b), f"deterministic op {i} differs between jitune._fast and ctypes"
    for a, b in zip(fast[1][:2], slow[1][:2]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)
    scale = float((xf * yf).abs().sum())  # a float32 sum of 1M terms: its rounding grows with the terms' size
    assert abs(float(fast[1][2]) - float(slow[1][2])) <= 1e-5 * scale
    close(fast[0][0], x * y + w)
    assert torch.equal(fast[0][1], m.t().contiguous())
    assert torch.equal(fast[0][3], m.amax(-1))
    assert torch.equal(fast[0][4], F.interpolate(img, scale_factor=2, mode="nearest"))
    close(fast[1][0], dst.index_add(0, idx, src))
    assert abs(float(fast[1][2]) - float(torch.dot(xf, yf))) <= 1e-5 * scale
