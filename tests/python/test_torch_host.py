"""jitune.torch without a GPU: the registered schemas, the fake implementations' shape, dtype and stride rules
under FakeTensor (fake CUDA tensors need no device), the checks that run on metadata, and the clear error for
host tensors."""
import pytest

torch = pytest.importorskip("torch")
jt = pytest.importorskip("jitune.torch")
import jitune  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

OPS = ("elementwise", "elementwise_out", "permute", "upsample_nearest2d", "upsample_nearest2d_backward", "index_add", "index_add_",
       "scatter_add", "scatter_add_", "dot", "conv2d", "conv2d_fused", "reduce_rows")


def test_every_op_is_registered_with_fake_and_autograd_kernels():
    for name in OPS:
        op = getattr(torch.ops.jitune, name).default
        qualified = op.name()
        assert qualified == f"jitune::{name}"
        for key in ("CUDA", "CPU", "Meta", "Autograd"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key), (qualified, key)
    # Mutation is declared where it happens, and only there.
    assert torch.ops.jitune.index_add_.default._schema.arguments[0].alias_info.is_write
    assert torch.ops.jitune.index_add.default._schema.arguments[0].alias_info is None
    assert torch.ops.jitune.elementwise_out.default._schema.arguments[2].alias_info.is_write


@pytest.fixture
def fake():
    with FakeTensorMode() as mode:
        yield mode


def cuda(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="cuda")


def test_fake_shapes_follow_the_ops(fake):
    x = cuda(2, 3, 5, 7, dtype=torch.float16)
    assert jt.permute(x, (3, 1, 0, 2)).shape == (7, 3, 2, 5)
    assert jt.elementwise("z = x * y + w", x, x, x).shape == x.shape
    assert jt.elementwise("z = x * y", x, x).dtype == torch.float16
    up = jt.upsample_nearest2d(x, scale_factor=2)
    assert up.shape == (2, 3, 10, 14) and up.is_contiguous()
    assert jt.upsample_nearest2d(x, size=(4, 9), mode="nearest-exact").shape == (2, 3, 4, 9)
    assert jt.upsample_nearest2d(x, scale_factor=(1.5, 0.5)).shape == (2, 3, 7, 3)
    assert jt.upsample_nearest2d_backward(up, (2, 3, 5, 7), (10, 14), 2.0, 2.0).shape == (2, 3, 5, 7)
    w = cuda(4, 3, 3, 2, dtype=torch.float16)
    assert jt.conv2d(x, w).shape == (2, 4, 3, 6)
    for geometry in (dict(stride=2, padding=1, dilation=(1, 2)), dict(stride=(1, 3), padding=(0, 2))):
        image, weight = torch.empty(2, 3, 5, 7, device="meta"), torch.empty(4, 3, 3, 2, device="meta")
        want = torch.nn.functional.conv2d(image, weight, **geometry).shape
        assert jt.conv2d(x, w, cuda(4, dtype=torch.float16), **geometry).shape == want
    fused = jt.conv2d(x, w, epilogue="y = max(acc + r, 0.0f)", residual=cuda(2, 4, 3, 6, dtype=torch.float16))
    assert fused.shape == (2, 4, 3, 6) and fused.dtype == torch.float16
    with pytest.raises(jitune.InvalidArgumentError, match="residual has shape"):
        jt.conv2d(x, w, epilogue="y = acc + r", residual=cuda(2, 4, 3, 5, dtype=torch.float16))
    with pytest.raises(jitune.InvalidArgumentError, match="without an epilogue"):
        jt.conv2d(x, w, residual=cuda(2, 4, 3, 6, dtype=torch.float16))
    x32 = cuda(2, 3, 5, 7)
    assert jt.conv2d(x32, cuda(4, 3, 3, 2), precision="tf32").shape == (2, 4, 3, 6)
    with pytest.raises(jitune.InvalidArgumentError, match="precision 'half'; it is 'ieee'"):
        jt.conv2d(x32, cuda(4, 3, 3, 2), precision="half")
    assert jt.sum_rows(x).shape == (2, 3, 5) and jt.amax_rows(cuda(9)).shape == ()
    assert jt.dot(cuda(8), cuda(8)).shape == ()
    dst, src = cuda(10, 4), cuda(6, 4)
    index = torch.empty(6, dtype=torch.int64, device="cuda")
    assert jt.index_add(dst, index, src, alpha=2).shape == (10, 4)
    assert jt.scatter_add(cuda(10), index, cuda(9)).shape == (10,)


def test_fake_upsample_keeps_channels_last(fake):
    x = cuda(2, 8, 5, 7).contiguous(memory_format=torch.channels_last)
    y = jt.upsample_nearest2d(x, scale_factor=2)
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    g = jt.upsample_nearest2d_backward(y, (2, 8, 5, 7), (10, 14), 2.0, 2.0)
    assert g.is_contiguous(memory_format=torch.channels_last)


def test_fake_elementwise_broadcasts(fake):
    x = cuda(2, 3, 5, 7, dtype=torch.float16)
    assert jt.elementwise("z = x * y", x, cuda(7, dtype=torch.float16)).shape == (2, 3, 5, 7)
    assert jt.elementwise("z = x * y", cuda(3, 1, 7, dtype=torch.float16), cuda(5, 1, dtype=torch.float16)).shape == \
        (3, 5, 7)
    y = jt.elementwise("z = x * y", x.permute(0, 3, 1, 2), cuda(5, dtype=torch.float16))
    assert y.shape == (2, 7, 3, 5) and y.stride() == (105, 1, 35, 7)  # x's memory order, as x.permute(...) * y


def test_meta_tensors_use_the_fake_rules():
    x = torch.empty(4, 6, device="meta")
    assert jt.permute(x, (1, 0)).shape == (6, 4)
    assert jt.sum_rows(x).device.type == "meta"


@pytest.mark.parametrize("call, words", [
    (lambda x: jt.permute(x, (0, 0, 1, 2)), "not a permutation"),
    (lambda x: jt.elementwise("z = x * y", x, x[:, :2]), "do not broadcast"),
    (lambda x: jt.elementwise("z = x * y", x, x.to(torch.float32)), "convert one"),
    (lambda x: jt.elementwise("z = x"), "no input tensors"),
    (lambda x: jt.conv2d(x, cuda(4, 2, 3, 3, dtype=torch.float16)), "must be (K, C=3"),
    (lambda x: jt.conv2d(x, cuda(4, 3, 9, 9, dtype=torch.float16)), "kernel is larger"),
    (lambda x: jt.dot(x, x), "1-D"),
    (lambda x: jt.reduce_rows(x, "mean"), "'sum' or 'max'"),
    (lambda x: jt.amax_rows(cuda(3, 0)), "empty last dim"),
    (lambda x: jt.index_add(cuda(4, 2), torch.empty(3, device="cuda"), cuda(3, 2)), "int32 or int64"),
    (lambda x: jt.index_add(cuda(4, 2), torch.empty(3, dtype=torch.int32, device="cuda"), cuda(2, 2)),
     "(len(index), *self.shape[1:])"),
    (lambda x: jt.upsample_nearest2d(x, mode="bilinear", size=4), "'nearest' and 'nearest-exact'"),
    (lambda x: jt.upsample_nearest2d(x), "exactly one of size and scale_factor"),
    (lambda x: jt.sum_rows(torch.empty(3, 3, dtype=torch.int32, device="cuda")), "float32, float16 or bfloat16"),
])
def test_bad_calls_raise_invalid_argument_from_the_metadata(fake, call, words):
    x = cuda(2, 3, 5, 7, dtype=torch.float16)
    with pytest.raises(jitune.InvalidArgumentError) as err:
        call(x)
    assert words in str(err.value)
    assert isinstance(err.value, ValueError)


def test_host_tensors_get_a_clear_error():
    x = torch.randn(4, 4)
    with pytest.raises(jitune.InvalidArgumentError, match="host memory.*cuda"):
        jt.permute(x, (1, 0))
    with pytest.raises(jitune.InvalidArgumentError, match="host memory"):
        jt.sum_rows(x.requires_grad_())


def test_in_place_ops_refuse_gradients(fake):
    dst = cuda(4, 2).requires_grad_()
    index = torch.empty(3, dtype=torch.int64, device="cuda")
    with pytest.raises(RuntimeError, match="no derivative"):
        jt.index_add_(dst, index, cuda(3, 2))
    with torch.no_grad():
        assert jt.index_add_(dst, index, cuda(3, 2)) is dst


def test_elementwise_has_no_derivative_and_says_so():
    x = torch.empty(8, device="meta", requires_grad=True)
    y = jt.elementwise("z = x * 2", x)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="has no derivative"):
        y.sum().backward()


def _view_recipes(seed, count):
    """Random views, as (base shape, list of (method, args)): permutes, slices with steps, expands of size-1 dims,
    channels_last, lower-rank broadcasts and 0-d scalars; each applied to a host tensor and to a fake CUDA tensor."""
    import random
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        full = [rng.choice((1, 2, 3, 5, 8)) for _ in range(rng.randint(1, 4))]
        inputs = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.15:
                inputs.append(((), []))
                continue
            rank = rng.randint(1, len(full)) if kind < 0.35 else len(full)
            shape = full[len(full) - rank:]
            shape = [1 if rng.random() < 0.2 else n for n in shape]
            steps = []
            perm = list(range(rank))
            rng.shuffle(perm)
            base = [shape[perm.index(d)] for d in range(rank)]  # so that .permute(perm) gives `shape`
            if rng.random() < 0.3:  # a sliced base: one extra element along a dim, sliced away
                d = rng.randrange(rank)
                base[d] += 1
                steps.append(("narrow", (d, 1, base[d] - 1)))
            steps.append(("permute", tuple(perm)))
            if rng.random() < 0.3:  # expand some size-1 dims to the full size (stride 0)
                sizes = [full[len(full) - rank + k] if n == 1 and rng.random() < 0.5 else n
                         for k, n in enumerate(shape)]
                steps.append(("expand", tuple(sizes)))
            if rank == 4 and rng.random() < 0.3:
                steps = [("contiguous_cl", ())]
                base = shape
            inputs.append((tuple(base), steps))
        out.append(inputs)
    return out


def _apply(t, steps):
    for method, args in steps:
        if method == "contiguous_cl":
            t = t.contiguous(memory_format=torch.channels_last)
        else:
            t = getattr(t, method)(*args)
    return t


def test_elementwise_results_are_laid_out_as_pytorch_lays_them_out():
    """The result of jt.elementwise over views (fake CUDA tensors) has the strides PyTorch gives one op over the
    same inputs on host tensors: neg for one input, mul for two, addcmul for three (TensorIterator ops over all
    inputs at once)."""
    checked = 0
    mode = FakeTensorMode()
    for inputs in _view_recipes(21, 400):
        host = [_apply(torch.rand(base), steps) for base, steps in inputs]
        try:
            want = {1: torch.neg, 2: torch.mul, 3: torch.addcmul}[len(host)](*host)
        except RuntimeError:
            continue  # shapes that do not broadcast
        if want.numel() == 0:
            continue
        with mode:
            views = [_apply(cuda(*base), steps) for base, steps in inputs]
            got = jt.elementwise("z = " + " * ".join("abc"[:len(views)]), *views)
        assert got.shape == want.shape
        assert got.stride() == want.stride(), (inputs, got.stride(), want.stride())
        # A second call over the same views takes the remembered answer: the same strides.
        with mode:
            again = jt.elementwise("z = " + " * ".join("abc"[:len(views)]), *views)
        assert again.stride() == want.stride()
        checked += 1
    assert checked > 250


def test_remembered_result_layouts_are_bounded_and_keyed_by_strides(monkeypatch):
    """The layout memo never grows past its limit, and views of one shape with other strides get their own answer."""
    monkeypatch.setattr(jt, "_RESULT_STRIDES_LIMIT", 8)
    jt._RESULT_STRIDES.clear()
    with FakeTensorMode():
        base = cuda(4, 6, 5)
        for k in range(20):
            jt.elementwise("y = x * x", cuda(k + 1, 3).t())
            assert len(jt._RESULT_STRIDES) <= 8
        kept = jt.elementwise("y = x * x", base.permute(0, 2, 1))
        plain = jt.elementwise("y = x * x", base.permute(0, 2, 1).contiguous())
    assert kept.shape == plain.shape == (4, 5, 6)
    assert kept.stride() == (30, 1, 5) and plain.stride() == (30, 6, 1)


def test_result_layouts_of_symbolic_sizes_are_computed_not_remembered():
    """torch.compile with dynamic shapes hands the op fake tensors whose sizes are SymInts, which cannot be hashed:
    the layout rule runs for them (this failed with "unhashable type: non-nested SymInt" when the memo came in)."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    jt._RESULT_STRIDES.clear()
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 3)
    x = mode.from_tensor(torch.empty(4, 6, 5), source=ConstantSource("x"), symbolic_context=dynamic)
    with mode:
        x = x.to("cuda")
        assert any(isinstance(size, torch.SymInt) for size in x.shape)
        kept = jt.elementwise("y = x * x", x.permute(0, 2, 1))
        plain = jt.elementwise("y = x * x + 1", x)
    assert tuple(int(v) for v in kept.stride()) == (30, 1, 5)
    assert tuple(int(v) for v in plain.stride()) == (30, 5, 1)
    assert not jt._RESULT_STRIDES


def test_elementwise_out_writes_the_given_view(fake):
    x, s, b = cuda(4, 6, 5, dtype=torch.float16), cuda(dtype=torch.float16), cuda(6, dtype=torch.float16)
    kept = jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b)
    assert kept.shape == (4, 5, 6) and kept.stride() == (30, 1, 5)  # x's memory order: no transpose
    out = cuda(4, 5, 6, dtype=torch.float16)
    assert jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b, out=out) is out
    with pytest.raises(jitune.InvalidArgumentError, match=r"out has shape \(4, 6, 5\) but the inputs broadcast"):
        jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b, out=cuda(4, 6, 5, dtype=torch.float16))
    with pytest.raises(jitune.InvalidArgumentError, match="out"):
        jt.elementwise("y = x * s + b", x.permute(0, 2, 1), s, b, out=cuda(4, 5, 6))
