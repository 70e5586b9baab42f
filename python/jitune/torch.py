"""jitune's ops as PyTorch operators: ``torch.ops.jitune.*``, registered through ``torch.library``.

``import jitune.torch`` registers them (namespace ``jitune``) and gives Python wrappers with PyTorch's argument
conventions: :func:`elementwise`, :func:`permute`, :func:`upsample_nearest2d`, :func:`index_add`,
:func:`scatter_add` (and the in-place :func:`index_add_`, :func:`scatter_add_`), :func:`dot`, :func:`conv2d`,
:func:`sum_rows`, :func:`amax_rows`.

Every op has a fake (meta) implementation, so ``torch.compile(fullgraph=True)`` traces it without a graph break,
and an autograd kernel (docs/python.md lists each op's derivative):

- permute: the inverse permute (jitune's kernel); upsample_nearest2d: jitune's own backward kernel;
- index_add / scatter_add: the gradient of ``source`` is a gather of the output's gradient (``index_select``);
- dot: ``grad * y`` and ``grad * x``; sum_rows / amax_rows: a broadcast (amax splits the gradient evenly among
  the maxima of a row, as ``torch.amax`` does);
- conv2d: the input and weight gradients run PyTorch's (cuDNN's) ``torch.nn.grad.conv2d_input`` /
  ``conv2d_weight``: jitune has no backward convolution kernel;
- elementwise: no derivative (an expression is not differentiated); backward through it raises.

Per-call cost. The op is a low-level ``torch.library.Library`` op (``torch.library.custom_op`` costs several µs
more per call, bench/RESULTS.md). Its autograd kernel is jitune's own: for plain CUDA tensors with no gradient to
record and no dispatch mode active it calls the CUDA kernel's Python function at once; tensor subclasses
(FakeTensor, FunctionalTensor under torch.compile), dispatch modes and gradients take the ordinary path through
the dispatcher and an ``autograd.Function``. The CUDA kernel reads the pointers, shapes and the current stream
and makes one call into libjitune: through jitune._fast (a stable-ABI extension, about 1 µs cheaper per call) for
every op but conv2d where the wheel has it, else ctypes.

Inputs that are not contiguous are made contiguous first (a copy); upsample_nearest2d, conv2d in float16 /
bfloat16 on sm_80+ and float32 conv2d of a 3x3 filter of stride 1 (Winograd) keep channels_last tensors
channels_last (jitune's NHWC kernels). Tensors of an op must be on one CUDA device; the op runs on that
device's current stream. Under ``torch.cuda.graph`` a warm op is captured and replays; an op whose kernel was
never compiled for that problem raises jitune.InvalidArgumentError saying to run it once before capturing.
"""
from __future__ import annotations

import ctypes
import math
from typing import Optional, Sequence

import torch

from . import _lib, _runtime
from .errors import InvalidArgumentError

__all__ = [
    "elementwise", "permute", "upsample_nearest2d", "upsample_nearest2d_backward", "index_add", "index_add_",
    "scatter_add", "scatter_add_", "dot", "conv2d", "sum_rows", "amax_rows", "reduce_rows",
]

_C = _lib.lib
_F = _lib.fast  # jitune._fast, or None: then every call goes through ctypes
_check = _lib.check
_runtime_for = _runtime.runtime_for
_handles = _runtime._handles  # device -> runtime handle; runtime_for creates a missing one
_raw_stream = torch._C._cuda_getCurrentRawStream
_dispatch_modes = torch._C._len_torch_dispatch_stack
_grad_enabled = torch.is_grad_enabled
_Plain = torch.Tensor

_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int8: 4,
          torch.uint8: 5, torch.int16: 6, torch.int32: 7, torch.int64: 8}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_INDEX = (torch.int32, torch.int64)
_NCHW, _NHWC = 0, 1

_LIB = torch.library.Library("jitune", "DEF")


# ---------------------------------------------------------------------------------------------------------------
# Checks shared by the CUDA kernels and the fake implementations (they run on fake tensors too, so they read only
# metadata).

def _fail(message: str):
    raise InvalidArgumentError(f"jitune: {message}")


def _need_float(op: str, name: str, t: torch.Tensor):
    if t.dtype not in _FLOATS:
        _fail(f"{op}: {name} is {t.dtype}; jitune's {op} takes float32, float16 or bfloat16 tensors")


def _need_same(op: str, name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor):
    if t.dtype != ref.dtype:
        _fail(f"{op}: {name} is {t.dtype} but {ref_name} is {ref.dtype}; convert one with .to(dtype)")
    if t.get_device() != ref.get_device():  # ordinals: cheaper than comparing torch.device objects
        _fail(f"{op}: {name} is on {t.device} but {ref_name} is on {ref.device}; move them to one CUDA device")


_is_compiling = torch.compiler.is_compiling


def _direct(*tensors) -> bool:
    """Whether a public wrapper may call the op's CUDA function itself, skipping the dispatcher (about 4 µs of
    host time per call on the H100 machine): eager mode (not traced by torch.compile: checked first, so Dynamo
    folds it), plain CUDA tensors, no gradient to record, no dispatch mode. Anything else takes torch.ops.jitune.*
    and gets the same result."""
    if _is_compiling() or _dispatch_modes():
        return False
    grad = _grad_enabled()
    for t in tensors:
        if type(t) is not _Plain or not t.is_cuda or (grad and t.requires_grad):
            return False
    return True


def _empty(like: torch.Tensor, shape) -> torch.Tensor:
    """A new tensor of like's dtype and device and `shape` (a sequence of ints). The sizes go one by one: parsing a
    torch.Size or tuple argument costs about 1 µs more per call."""
    return like.new_empty(*shape) if shape else like.new_empty(())


def _contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous() else t.contiguous()


def _device(t: torch.Tensor) -> int:
    return t.get_device()  # the CUDA ordinal (cheaper than t.device.index: no torch.device object)


# ---------------------------------------------------------------------------------------------------------------
# Registration: schema, CUDA kernel, fake kernel, and jitune's autograd kernel.

class _Derivative:
    """How an op's gradient is formed: `save(ctx, args, out)` keeps what `grads(ctx, grad)` needs; grads returns
    one gradient (or None) per op argument. None: the op has no derivative."""

    def __init__(self, save, grads):
        self.save = save
        self.grads = grads


def _make_function(name: str, op, derivative: Optional[_Derivative], unflatten):
    def forward(ctx, *flat):
        args = unflatten(flat)
        with torch._C._AutoDispatchBelowAutograd():
            out = op(*args)
        ctx.n_inputs = len(flat)  # arguments left at their schema default are not passed
        if derivative is not None:
            derivative.save(ctx, args, out)
        return out

    def backward(ctx, grad):
        if derivative is None:
            raise RuntimeError(
                f"jitune::{name} has no derivative: jitune does not differentiate its expressions. Compute the "
                "gradient with PyTorch ops, or detach the inputs of this op.")
        return tuple(derivative.grads(ctx, grad))[:ctx.n_inputs]

    return type(f"_{name}_function", (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def _autograd_kernel(op, cuda, function, tensors_of, flatten):
    """The Autograd kernel: plain CUDA tensors needing no gradient go straight to `cuda`; everything else through
    the dispatcher below autograd or through `function` (an autograd.Function, which takes the op's arguments
    flattened: autograd sees tensors only as direct arguments, not inside a list)."""

    def kernel(*args):
        tensors = tensors_of(args)
        plain = not _dispatch_modes()
        needs_grad = False
        for t in tensors:
            if type(t) is not _Plain or not t.is_cuda:
                plain = False
            if t.requires_grad:
                needs_grad = True
        if needs_grad and _grad_enabled():
            if function is None:
                raise RuntimeError(
                    f"{op.name()}: an input requires grad, but this op writes into a given tensor and has no "
                    "derivative; use the out-of-place op, or run it under torch.no_grad()")
            return function.apply(*flatten(args))
        if plain:
            return cuda(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    return kernel


def _host_kernel(name: str):
    def kernel(*args, **kwargs):
        _fail(f"{name}: the tensors are in host memory (CPU); jitune's ops run on CUDA tensors: move them to the GPU "
              "with .cuda()")

    return kernel


def _same(args):
    return args


def _register(name: str, schema: str, cuda, fake, tensors_of, derivative: Optional[_Derivative], flatten=_same,
              unflatten=_same, mutates=False):
    _LIB.define(f"{name}{schema}")
    _LIB.impl(name, cuda, "CUDA")
    _LIB.impl(name, _host_kernel(name), "CPU")
    torch.library.register_fake(f"jitune::{name}", fake, lib=_LIB)
    op = getattr(torch.ops.jitune, name).default
    function = None if mutates or name.endswith("_") else _make_function(name, op, derivative, unflatten)
    _LIB.impl(name, _autograd_kernel(op, cuda, function, tensors_of, flatten), "Autograd")
    return op


def _first(args):
    return (args[0],)


def _first_two(args):
    return (args[0], args[1])


def _first_three(args):
    return (args[0], args[1], args[2])


_POINTER_ARRAYS = [ctypes.c_void_p * count for count in range(9)]
_EXPRESSIONS = {}  # expression text -> its UTF-8 bytes

# ---------------------------------------------------------------------------------------------------------------
# elementwise(str expr, Tensor[] inputs) -> Tensor

def _elementwise_check(expr: str, inputs: Sequence[torch.Tensor]):
    if not inputs:
        _fail(f"elementwise: '{expr}' got no input tensors; pass one tensor per input name of the expression")
    if len(inputs) > 8:
        _fail(f"elementwise: {len(inputs)} inputs; an expression takes at most 8")
    first = inputs[0]
    _need_float("elementwise", "input 0", first)
    for i, t in enumerate(inputs[1:], 1):
        _need_same("elementwise", f"input {i}", t, "input 0", first)
    return _broadcast_shape(inputs)


def _broadcast_shape(inputs):
    try:
        return torch.broadcast_shapes(*[t.shape for t in inputs])
    except RuntimeError:
        shapes = ", ".join(str(tuple(t.shape)) for t in inputs)
        _fail(f"elementwise: the input shapes {shapes} do not broadcast (PyTorch's rule: right-aligned, each size "
              "equal or 1); expand or reshape them")


def _elementwise_regular(inputs) -> bool:
    """One dtype among jitune's floats, one shape, one device, all contiguous: the common case, checked cheaply."""
    first = inputs[0]
    dtype = first.dtype
    if dtype not in _FLOATS or len(inputs) > 8 or not first.is_contiguous():
        return False
    if len(inputs) > 1:
        shape, dev = first.shape, first.get_device()
        for t in inputs[1:]:
            if t.dtype is not dtype or t.get_device() != dev or not t.is_contiguous() or t.shape != shape:
                return False
    return True


def _elementwise_cuda(expr: str, inputs):
    if not inputs or not _elementwise_regular(inputs):
        return _elementwise_views(expr, inputs, _elementwise_result(expr, inputs))
    first = inputs[0]
    out = torch.empty_like(first)
    n = out.numel()
    if n == 0:
        return out
    dev = _device(first)
    text = _EXPRESSIONS.get(expr)
    if text is None:
        text = _EXPRESSIONS[expr] = expr.encode()
    rt = _handles.get(dev) or _runtime_for(dev)
    if _F:
        status = _F.elementwise(rt, text, out.data_ptr(), n, _DTYPE[first.dtype], _raw_stream(dev),
                                *[t.data_ptr() for t in inputs])
    else:
        pointers = _POINTER_ARRAYS[len(inputs)](*[t.data_ptr() for t in inputs])
        status = _C.jitune_elementwise(rt, text, pointers, len(inputs), out.data_ptr(), n,
                                       _DTYPE[first.dtype], _raw_stream(dev))
    if status:
        _check(status)
    return out


def _dense(shape, strides) -> bool:
    """Whether the elements of `shape` fill a block of memory exactly once (PyTorch's non-overlapping and dense)."""
    step = 1
    for size, stride in sorted((p for p in zip(shape, strides) if p[0] != 1), key=lambda p: p[1]):
        if stride != step:
            return False
        step *= size
    return True


_RESULT_STRIDES = {}  # (shape, ((input shape, input strides), ...)) -> _result_strides' answer
_RESULT_STRIDES_LIMIT = 4096  # cleared when full: a long-running process meets few distinct view sets


def _result_strides(shape, inputs):
    """_layout_strides, remembered per shape and input shapes and strides (it only reads those): a warm call with
    views costs a dict lookup instead of the rule (about 4 µs of Python a call on the CPU machine). Symbolic sizes
    (torch.compile's fake tensors with dynamic shapes) are not hashable: those calls run the rule every time."""
    key = (tuple(shape), tuple((tuple(t.shape), t.stride()) for t in inputs))
    try:
        found = _RESULT_STRIDES.get(key, _RESULT_STRIDES)
    except TypeError:
        return _layout_strides(shape, inputs)
    if found is not _RESULT_STRIDES:
        return found
    if len(_RESULT_STRIDES) >= _RESULT_STRIDES_LIMIT:
        _RESULT_STRIDES.clear()
    strides = _RESULT_STRIDES[key] = _layout_strides(shape, inputs)
    return strides


def _layout_strides(shape, inputs):
    """The strides PyTorch gives the result of one elementwise op over `inputs` broadcast to `shape` (TensorIterator's
    rule), or None for contiguous: contiguous when every input is; channels_last when every input is a 4-d
    channels_last tensor of `shape`; the inputs' strides when they all share them and are dense; else the dims in
    the inputs' memory order (the first input whose strides tell two dims apart decides; broadcast dims are
    skipped; equal strides put the smaller dim inside). So a permuted input gives a permuted result with no
    transpose, as ``x.permute(0, 2, 1) * s + b`` does."""
    same_shape = all(tuple(t.shape) == tuple(shape) for t in inputs)
    if same_shape:
        if all(t.is_contiguous() for t in inputs):
            return None
        if len(shape) == 4 and all(t.is_contiguous(memory_format=torch.channels_last) for t in inputs):
            n, c, h, w = shape
            return (h * w * c, 1, w * c, c) if n * c * h * w else None
        first = tuple(inputs[0].stride())
        if all(tuple(t.stride()) == first for t in inputs) and _dense(shape, first):
            return first
    ndim = len(shape)
    if ndim < 2 or math.prod(shape) == 0:
        return None
    strides = []  # per input, over the broadcast dims: 0 where it is broadcast
    for t in inputs:
        st = [0] * ndim
        offset = ndim - t.dim()
        for k, (size, stride) in enumerate(zip(t.shape, t.stride())):
            st[offset + k] = 0 if size == 1 and shape[offset + k] != 1 else stride
        strides.append(st)

    def order(d0, d1):  # 1: d0 goes outside d1; -1: inside; 0: no input tells
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # innermost first; an insertion sort that leaves ties in place
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = order(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    if perm == list(range(ndim - 1, -1, -1)):
        return None
    out, step = [0] * ndim, 1
    for d in perm:
        out[d] = step
        step *= shape[d]
    return tuple(out)


def _elementwise_result(expr: str, inputs):
    """The checked broadcast shape and a new result tensor laid out as PyTorch lays it out (_result_strides)."""
    shape = _elementwise_check(expr, inputs)
    strides = _result_strides(shape, inputs)
    first = inputs[0]
    return first.new_empty(shape) if strides is None else first.new_empty_strided(shape, strides)


def _elementwise_views(expr: str, inputs, out):
    """Inputs of different shapes (broadcast) or any strides: one elementwise_view kernel over the views as they
    are (no copies), into `out` (any non-overlapping view of the broadcast shape; libjitune checks it)."""
    if out.numel() == 0:
        return out
    first = inputs[0]
    values = [_DTYPE[first.dtype], len(inputs), 0]  # no scalar inputs: 0-d tensors are views with no dims
    for t in (out, *inputs):
        values += [t.dim(), *t.shape, t.dim(), *t.stride()]
    buffers = [t.data_ptr() for t in inputs] + [out.data_ptr()]
    text = _EXPRESSIONS.get(expr)
    if text is None:
        text = _EXPRESSIONS[expr] = expr.encode()
    dev = _device(first)
    rt = _handles.get(dev) or _runtime_for(dev)
    status = _C.jitune_call(rt, b"elementwise_view", (ctypes.c_int64 * len(values))(*values), len(values), text,
                            None, 0, (ctypes.c_void_p * len(buffers))(*buffers), len(buffers), _raw_stream(dev))
    if status:
        _check(status)
    return out


def _elementwise_fake(expr: str, inputs):
    return _elementwise_result(expr, inputs)  # checks first: it says what is wrong with no inputs


_elementwise = _register("elementwise", "(str expr, Tensor[] inputs) -> Tensor", _elementwise_cuda,
                         _elementwise_fake, lambda args: args[1], None, lambda args: (args[0], *args[1]),
                         lambda flat: (flat[0], list(flat[1:])))


def _elementwise_out_check(expr: str, inputs, out):
    shape = _elementwise_check(expr, inputs)
    _need_same("elementwise", "out", out, "input 0", inputs[0])
    if tuple(out.shape) != tuple(shape):
        _fail(f"elementwise: out has shape {tuple(out.shape)} but the inputs broadcast to {tuple(shape)}; pass an "
              "out of the broadcast shape")


def _elementwise_out_cuda(expr: str, inputs, out):
    _elementwise_out_check(expr, inputs, out)
    _elementwise_views(expr, inputs, out)


def _elementwise_out_fake(expr: str, inputs, out):
    _elementwise_out_check(expr, inputs, out)


_elementwise_out = _register("elementwise_out", "(str expr, Tensor[] inputs, Tensor(a!) out) -> ()",
                             _elementwise_out_cuda, _elementwise_out_fake, lambda args: (*args[1], args[2]), None,
                             mutates=True)


def elementwise(expr: str, *inputs: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`expr` ("z = x * y + 1") over float tensors of one dtype given in the order their names first appear on
    the right-hand side; returns z. Same-shaped contiguous tensors take the elementwise kernel; any others
    (broadcast by PyTorch's rules, permuted, sliced, expanded) take one elementwise_view kernel over the views as
    they are. Without `out`, z is a new tensor laid out as PyTorch lays out the result of one op over the same
    inputs: contiguous for contiguous inputs, else in the inputs' memory order, so
    ``elementwise("y = x * s + b", x.permute(0, 2, 1), s, b)`` is one pass without a transpose, with the strides of
    ``x.permute(0, 2, 1) * s + b``. With `out` (the broadcast shape and the inputs' dtype, any strides whose elements
    do not overlap) z is written there and `out` returned: a contiguous `out` makes the same chain one transposing
    pass. No derivative."""
    if out is not None:
        if _direct(*inputs, out):
            _elementwise_out_cuda(expr, list(inputs), out)
        else:
            _elementwise_out(expr, list(inputs), out)
        return out
    if _direct(*inputs):
        return _elementwise_cuda(expr, inputs)
    return _elementwise(expr, list(inputs))


# ---------------------------------------------------------------------------------------------------------------
# permute(Tensor x, int[] perm) -> Tensor

def _permute_check(x: torch.Tensor, perm: Sequence[int]):
    if len(perm) != x.dim() or sorted(perm) != list(range(x.dim())):
        _fail(f"permute: perm {list(perm)} is not a permutation of the {x.dim()} dims of x")
    if x.dim() > 8:
        _fail(f"permute: x has {x.dim()} dims; jitune permutes at most 8")


_permute_args = {}  # (shape, perm) -> (output shape, ctypes shape, ctypes perm): built once per problem


def _permute_cuda(x: torch.Tensor, perm):
    key = (x.shape, tuple(perm))
    args = _permute_args.get(key)
    if args is None:
        _permute_check(x, perm)
        ndim = len(perm)
        args = (tuple(x.shape[p] for p in perm), (ctypes.c_int64 * ndim)(*x.shape), (ctypes.c_int32 * ndim)(*perm),
                tuple(x.shape), tuple(int(p) for p in perm))
        _permute_args[key] = args
    out = _empty(x, args[0])
    if out.numel() == 0:
        return out
    x = _contiguous(x)
    dev = _device(x)
    rt = _handles.get(dev) or _runtime_for(dev)
    if _F:
        status = _F.permute(rt, x.data_ptr(), out.data_ptr(), args[3], args[4], _DTYPE[x.dtype], _raw_stream(dev))
    else:
        status = _C.jitune_permute(rt, x.data_ptr(), out.data_ptr(), args[1], args[2], len(perm),
                                   _DTYPE[x.dtype], _raw_stream(dev))
    if status:
        _check(status)
    return out


def _permute_fake(x, perm):
    _permute_check(x, perm)
    return x.new_empty([x.shape[p] for p in perm])


def _permute_save(ctx, args, out):
    ctx.perm = args[1]


def _permute_grads(ctx, grad):
    inverse = [0] * len(ctx.perm)
    for i, p in enumerate(ctx.perm):
        inverse[p] = i
    return _permute(grad, inverse), None


_permute = _register("permute", "(Tensor x, int[] perm) -> Tensor", _permute_cuda, _permute_fake, _first,
                     _Derivative(_permute_save, _permute_grads))


def permute(x: torch.Tensor, perm: Sequence[int]) -> torch.Tensor:
    """``x.permute(perm).contiguous()`` in one kernel; any dtype. Its gradient is the inverse permute."""
    if _direct(x):
        return _permute_cuda(x, perm)
    return _permute(x, list(perm))


# ---------------------------------------------------------------------------------------------------------------
# upsample_nearest2d(Tensor x, SymInt[2] output_size, float? scale_h, float? scale_w, bool exact) -> Tensor and
# its backward.

def _is_nhwc(x: torch.Tensor) -> bool:
    return (not x.is_contiguous()) and x.is_contiguous(memory_format=torch.channels_last)


def _image_check(op: str, name: str, x: torch.Tensor):
    if x.dim() != 4:
        _fail(f"{op}: {name} has {x.dim()} dims; it takes an N x C x H x W batch")
    _need_float(op, name, x)


_upsample_shapes = {}  # (shape, sizes, scales, exact, layout, dtype) -> (jitune_upsample_nearest2d_shape, address)


def _upsample_shape(batch, out_size, scale_h, scale_w, exact, layout, dtype):
    key = (tuple(batch), tuple(out_size), scale_h, scale_w, exact, layout, dtype)
    shape = _upsample_shapes.get(key)
    if shape is None:
        shape = _lib.UpsampleNearest2dShape.make()
        shape.n, shape.c, shape.in_h, shape.in_w = batch
        shape.out_h, shape.out_w = out_size
        shape.scale_h = scale_h or 0.0
        shape.scale_w = scale_w or 0.0
        shape.layout = layout
        shape.mode = 1 if exact else 0
        shape.dtype = _DTYPE[dtype]
        shape = _upsample_shapes[key] = (shape, ctypes.addressof(shape))
    return shape


def _image_like(like: torch.Tensor, batch, nhwc: bool):
    """A new N x C x H x W tensor of like's dtype and device, channels_last when nhwc (new_empty and a permuted
    view: cheaper per call than torch.empty with a memory_format)."""
    if nhwc:
        n, c, h, w = batch
        return like.new_empty(n, h, w, c).permute(0, 3, 1, 2)
    return _empty(like, batch)


def _upsample_cuda(x, output_size, scale_h=None, scale_w=None, exact=False):
    _image_check("upsample_nearest2d", "x", x)
    nhwc = _is_nhwc(x)
    if not nhwc:
        x = _contiguous(x)
    n, c = x.shape[0], x.shape[1]
    out = _image_like(x, (n, c, output_size[0], output_size[1]), nhwc)
    if out.numel() == 0:
        return out
    shape = _upsample_shape(x.shape, output_size, scale_h, scale_w, exact, _NHWC if nhwc else _NCHW, x.dtype)
    dev = _device(x)
    rt = _handles.get(dev) or _runtime_for(dev)
    if _F:
        status = _F.upsample_nearest2d(rt, shape[1], x.data_ptr(), out.data_ptr(), _raw_stream(dev), 0)
    else:
        status = _C.jitune_upsample_nearest2d(rt, ctypes.byref(shape[0]), x.data_ptr(), out.data_ptr(),
                                              _raw_stream(dev))
    if status:
        _check(status)
    return out


def _upsample_fake(x, output_size, scale_h=None, scale_w=None, exact=False):
    _image_check("upsample_nearest2d", "x", x)
    return _image_like(x, (x.shape[0], x.shape[1], output_size[0], output_size[1]), _is_nhwc(x))


def _upsample_bwd_cuda(grad_output, input_size, output_size, scale_h=None, scale_w=None, exact=False):
    _image_check("upsample_nearest2d_backward", "grad_output", grad_output)
    nhwc = _is_nhwc(grad_output)
    if not nhwc:
        grad_output = _contiguous(grad_output)
    grad_input = _image_like(grad_output, input_size, nhwc)
    if grad_input.numel() == 0:
        return grad_input
    if grad_output.numel() == 0:
        return grad_input.zero_()
    shape = _upsample_shape(input_size, output_size, scale_h, scale_w, exact, _NHWC if nhwc else _NCHW,
                            grad_output.dtype)
    dev = _device(grad_output)
    rt = _handles.get(dev) or _runtime_for(dev)
    if _F:
        status = _F.upsample_nearest2d(rt, shape[1], grad_output.data_ptr(), grad_input.data_ptr(),
                                       _raw_stream(dev), 1)
    else:
        status = _C.jitune_upsample_nearest2d_backward(rt, ctypes.byref(shape[0]), grad_output.data_ptr(),
                                                       grad_input.data_ptr(), _raw_stream(dev))
    if status:
        _check(status)
    return grad_input


def _upsample_bwd_fake(grad_output, input_size, output_size, scale_h=None, scale_w=None, exact=False):
    _image_check("upsample_nearest2d_backward", "grad_output", grad_output)
    return _image_like(grad_output, input_size, _is_nhwc(grad_output))


def _upsample_save(ctx, args, out):
    x, ctx.output_size = args[0], args[1]
    ctx.input_size = list(x.shape)
    ctx.rest = tuple(args[2:])


def _upsample_grads(ctx, grad):
    return (_upsample_backward(grad, ctx.input_size, ctx.output_size, *ctx.rest),) + (None,) * (1 + len(ctx.rest))


_UPSAMPLE_ARGS = "SymInt[2] output_size, float? scale_h=None, float? scale_w=None, bool exact=False"
_upsample_backward = _register(
    "upsample_nearest2d_backward", f"(Tensor grad_output, SymInt[4] input_size, {_UPSAMPLE_ARGS}) -> Tensor",
    _upsample_bwd_cuda, _upsample_bwd_fake, _first, None)
_upsample = _register("upsample_nearest2d", f"(Tensor x, {_UPSAMPLE_ARGS}) -> Tensor", _upsample_cuda,
                      _upsample_fake, _first, _Derivative(_upsample_save, _upsample_grads))


def _pair(value, name):
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            _fail(f"upsample_nearest2d: {name} {value} must have 2 entries (height, width)")
        return value[0], value[1]
    return value, value


def upsample_nearest2d(x: torch.Tensor, size=None, scale_factor=None, mode: str = "nearest") -> torch.Tensor:
    """``F.interpolate(x, size, scale_factor, mode)`` for mode "nearest" or "nearest-exact" on an NCHW batch
    (channels_last stays channels_last). Bit-identical to PyTorch; its gradient is jitune's backward kernel."""
    if mode not in ("nearest", "nearest-exact"):
        _fail(f"upsample_nearest2d: mode '{mode}'; jitune implements 'nearest' and 'nearest-exact'")
    if (size is None) == (scale_factor is None):
        _fail("upsample_nearest2d: give exactly one of size and scale_factor, as F.interpolate requires")
    if size is not None:
        out_h, out_w = _pair(size, "size")
        scale_h = scale_w = None
    else:
        scale_h, scale_w = _pair(scale_factor, "scale_factor")
        scale_h, scale_w = float(scale_h), float(scale_w)
        out_h = math.floor(x.shape[2] * scale_h)
        out_w = math.floor(x.shape[3] * scale_w)
    if _direct(x):
        return _upsample_cuda(x, (out_h, out_w), scale_h, scale_w, mode == "nearest-exact")
    return _upsample(x, [out_h, out_w], scale_h, scale_w, mode == "nearest-exact")


def upsample_nearest2d_backward(grad_output: torch.Tensor, input_size, output_size, scale_h=None, scale_w=None,
                                exact: bool = False) -> torch.Tensor:
    """The gradient of :func:`upsample_nearest2d` for `grad_output` (written, not accumulated)."""
    if _direct(grad_output):
        return _upsample_bwd_cuda(grad_output, tuple(input_size), tuple(output_size), scale_h, scale_w, exact)
    return _upsample_backward(grad_output, list(input_size), list(output_size), scale_h, scale_w, exact)


# ---------------------------------------------------------------------------------------------------------------
# index_add(Tensor self, Tensor index, Tensor source, float alpha, bool check_indices) -> Tensor and the 1-D
# scatter_add.

def _index_check(op: str, dst: torch.Tensor, index: torch.Tensor, src: torch.Tensor, one_d: bool):
    dtype, device = dst.dtype, dst.get_device()
    if dtype not in _FLOATS:
        _need_float(op, "self", dst)
    if src.dtype is not dtype or src.get_device() != device:
        _need_same(op, "source", src, "self", dst)
    index_dtype = index.dtype
    if index_dtype is not torch.int32 and index_dtype is not torch.int64:
        _fail(f"{op}: index is {index_dtype}; it must be int32 or int64")
    if index.get_device() != device:
        _fail(f"{op}: index is on {index.device} but self is on {dst.device}; move them to one CUDA device")
    if index.dim() != 1:
        _fail(f"{op}: index has {index.dim()} dims; it must be 1-D")
    if one_d:
        if dst.dim() != 1 or src.dim() != 1:
            _fail(f"{op}: self and source must be 1-D (got {dst.dim()} and {src.dim()} dims)")
        if src.shape[0] < index.shape[0]:
            _fail(f"{op}: index has {index.shape[0]} entries but source only {src.shape[0]}")
        return
    dst_shape, src_shape = dst.shape, src.shape
    dims = len(dst_shape)
    # (slicing a torch.Size builds a new one: compare the usual 2-D rows element by element)
    if (dims == 0 or len(src_shape) != dims or src_shape[0] != index.shape[0]
            or (dims == 2 and src_shape[1] != dst_shape[1]) or (dims > 2 and src_shape[1:] != dst_shape[1:])):
        _fail(f"{op}: source has shape {tuple(src_shape)}; along dim 0 it must be (len(index), *self.shape[1:]) "
              f"= {(index.shape[0],) + tuple(dst_shape[1:])}")


def _index_add_into(out, index, src, alpha, check_indices):
    """Adds into contiguous `out` in place (checked by the caller: index is 1-D)."""
    count, total = index.shape[0], out.numel()
    if count == 0 or total == 0:
        return
    if not index.is_contiguous():
        index = index.contiguous()
    if not src.is_contiguous():
        src = src.contiguous()
    rows = out.shape[0]
    dev = out.get_device()
    rt = _handles.get(dev) or _runtime_for(dev)
    call = _F.index_add if _F else _C.jitune_index_add
    status = call(rt, out.data_ptr(), rows, index.data_ptr(), count, _DTYPE[index.dtype], src.data_ptr(),
                  src.shape[0], total // rows, _DTYPE[out.dtype], alpha, 1 if check_indices else 0,
                  _raw_stream(dev))
    if status:
        _check(status)


def _scatter_add_into(out, index, src, alpha, check_indices):
    if index.numel() == 0 or out.numel() == 0:
        return
    index, src = _contiguous(index), _contiguous(src)
    dev = _device(out)
    rt = _handles.get(dev) or _runtime_for(dev)
    call = _F.scatter_add if _F else _C.jitune_scatter_add
    status = call(rt, out.data_ptr(), out.shape[0], index.data_ptr(), index.shape[0], _DTYPE[index.dtype],
                  src.data_ptr(), src.shape[0], _DTYPE[out.dtype], alpha, 1 if check_indices else 0,
                  _raw_stream(dev))
    if status:
        _check(status)


def _index_add_cuda(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("index_add", dst, index, src, False)
    out = dst.clone(memory_format=torch.contiguous_format)
    _index_add_into(out, index, src, alpha, check_indices)
    return out


def _scatter_add_cuda(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("scatter_add", dst, index, src, True)
    out = dst.clone(memory_format=torch.contiguous_format)
    _scatter_add_into(out, index, src, alpha, check_indices)
    return out


def _need_contiguous_self(op, dst):
    if not dst.is_contiguous():
        _fail(f"{op}: self is not contiguous; the in-place op writes it directly: pass a contiguous tensor, or use "
              f"the out-of-place {op[:-1]}")


def _index_add_inplace_cuda(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("index_add_", dst, index, src, False)
    _need_contiguous_self("index_add_", dst)
    _index_add_into(dst, index, src, alpha, check_indices)


def _scatter_add_inplace_cuda(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("scatter_add_", dst, index, src, True)
    _need_contiguous_self("scatter_add_", dst)
    _scatter_add_into(dst, index, src, alpha, check_indices)


def _index_add_inplace_fake(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("index_add_", dst, index, src, False)


def _scatter_add_inplace_fake(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("scatter_add_", dst, index, src, True)


def _index_add_fake(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("index_add", dst, index, src, False)
    return torch.empty_like(dst, memory_format=torch.contiguous_format)


def _scatter_add_fake(dst, index, src, alpha=1.0, check_indices=False):
    _index_check("scatter_add", dst, index, src, True)
    return torch.empty_like(dst, memory_format=torch.contiguous_format)


def _gather_save(ctx, args, out):
    ctx.save_for_backward(args[1])
    ctx.alpha = args[3] if len(args) > 3 else 1.0
    ctx.source_rows = args[2].shape[0]


def _gather_grads(ctx, grad):
    (index,) = ctx.saved_tensors
    grad_source = grad.index_select(0, index)
    if ctx.alpha != 1.0:
        grad_source = grad_source * ctx.alpha
    if grad_source.shape[0] < ctx.source_rows:  # scatter_add: source elements past the index get no gradient
        grad_source = torch.cat([grad_source, grad_source.new_zeros(ctx.source_rows - grad_source.shape[0])])
    return grad, None, grad_source, None, None


_INDEX_ARGS = "Tensor index, Tensor source, float alpha=1.0, bool check_indices=False"
_index_add = _register("index_add", f"(Tensor self, {_INDEX_ARGS}) -> Tensor", _index_add_cuda, _index_add_fake,
                       _first_three, _Derivative(_gather_save, _gather_grads))
_scatter_add = _register("scatter_add", f"(Tensor self, {_INDEX_ARGS}) -> Tensor", _scatter_add_cuda,
                         _scatter_add_fake, _first_three, _Derivative(_gather_save, _gather_grads))
# In place (what a training loop's accumulation wants: no copy of self). No derivative: autograd refuses them when
# a gradient is needed, as it would record an in-place write into a tensor it saved.
_index_add_inplace = _register("index_add_", f"(Tensor(a!) self, {_INDEX_ARGS}) -> ()", _index_add_inplace_cuda,
                               _index_add_inplace_fake, _first_three, None)
_scatter_add_inplace = _register("scatter_add_", f"(Tensor(a!) self, {_INDEX_ARGS}) -> ()",
                                 _scatter_add_inplace_cuda, _scatter_add_inplace_fake, _first_three, None)


def index_add(self: torch.Tensor, index: torch.Tensor, source: torch.Tensor, alpha: float = 1.0,
              check_indices: bool = False) -> torch.Tensor:
    """``self.index_add(0, index, source, alpha=alpha)`` (out of place). Indices outside [0, self.shape[0]) are
    skipped on the device; check_indices=True checks them first (a stream synchronisation) and raises naming the
    first bad one. The gradient of source is a gather of the output's gradient."""
    if _direct(self, index, source):
        return _index_add_cuda(self, index, source, float(alpha), bool(check_indices))
    return _index_add(self, index, source, float(alpha), bool(check_indices))


def index_add_(self: torch.Tensor, index: torch.Tensor, source: torch.Tensor, alpha: float = 1.0,
               check_indices: bool = False) -> torch.Tensor:
    """``self.index_add_(0, index, source, alpha=alpha)``: adds into contiguous `self` and returns it. Not
    differentiable (use :func:`index_add` in a graph that needs gradients)."""
    if _direct(self, index, source):
        _index_add_inplace_cuda(self, index, source, float(alpha), bool(check_indices))
    else:
        _index_add_inplace(self, index, source, float(alpha), bool(check_indices))
    return self


def scatter_add_(self: torch.Tensor, index: torch.Tensor, source: torch.Tensor, alpha: float = 1.0,
                 check_indices: bool = False) -> torch.Tensor:
    """1-D ``self.scatter_add_(0, index, source[:len(index)] * alpha)``: adds into contiguous `self` and returns
    it. Not differentiable."""
    if _direct(self, index, source):
        _scatter_add_inplace_cuda(self, index, source, float(alpha), bool(check_indices))
    else:
        _scatter_add_inplace(self, index, source, float(alpha), bool(check_indices))
    return self


def scatter_add(self: torch.Tensor, index: torch.Tensor, source: torch.Tensor, alpha: float = 1.0,
                check_indices: bool = False) -> torch.Tensor:
    """1-D ``self.scatter_add(0, index, source[:len(index)] * alpha)`` (out of place), PyTorch's fast half
    atomic add; index rules as :func:`index_add`."""
    if _direct(self, index, source):
        return _scatter_add_cuda(self, index, source, float(alpha), bool(check_indices))
    return _scatter_add(self, index, source, float(alpha), bool(check_indices))


# ---------------------------------------------------------------------------------------------------------------
# dot(Tensor x, Tensor y) -> Tensor

def _dot_check(x, y):
    _need_float("dot", "x", x)
    _need_same("dot", "y", y, "x", x)
    if x.dim() != 1 or y.shape != x.shape:
        _fail(f"dot: x and y must be 1-D of one length (got {tuple(x.shape)} and {tuple(y.shape)})")


def _dot_cuda(x, y):
    _dot_check(x, y)
    out = x.new_empty(())
    x, y = _contiguous(x), _contiguous(y)
    dev = _device(x)
    rt = _handles.get(dev) or _runtime_for(dev)
    call = _F.dot if _F else _C.jitune_dot
    status = call(rt, x.data_ptr(), y.data_ptr(), x.shape[0], out.data_ptr(), _DTYPE[x.dtype], _raw_stream(dev))
    if status:
        _check(status)
    return out


def _dot_fake(x, y):
    _dot_check(x, y)
    return x.new_empty(())


def _dot_save(ctx, args, out):
    ctx.save_for_backward(args[0], args[1])


def _dot_grads(ctx, grad):
    x, y = ctx.saved_tensors
    return grad * y, grad * x


_dot = _register("dot", "(Tensor x, Tensor y) -> Tensor", _dot_cuda, _dot_fake, _first_two,
                 _Derivative(_dot_save, _dot_grads))


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``torch.dot(x, y)``, accumulated in float32 and rounded once (a 0-dim tensor of x's dtype)."""
    if _direct(x, y):
        return _dot_cuda(x, y)
    return _dot(x, y)


# ---------------------------------------------------------------------------------------------------------------
# conv2d(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, int[2] dilation) -> Tensor

def _conv_out(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _conv_check(x, w, bias, stride, padding, dilation):
    _image_check("conv2d", "x", x)
    _need_same("conv2d", "weight", w, "x", x)
    if w.dim() != 4 or w.shape[1] != x.shape[1]:
        _fail(f"conv2d: weight has shape {tuple(w.shape)}; it must be (K, C={x.shape[1]}, R, S) (groups=1)")
    if bias is not None:
        _need_same("conv2d", "bias", bias, "x", x)
        if bias.shape != (w.shape[0],):
            _fail(f"conv2d: bias has shape {tuple(bias.shape)}; it must be ({w.shape[0]},)")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        _fail(f"conv2d: stride {list(stride)} and dilation {list(dilation)} must be >= 1, padding "
              f"{list(padding)} >= 0")
    p = _conv_out(x.shape[2], w.shape[2], stride[0], padding[0], dilation[0])
    q = _conv_out(x.shape[3], w.shape[3], stride[1], padding[1], dilation[1])
    if p < 1 or q < 1:
        _fail(f"conv2d: the output would be {p} x {q}: the (dilated) kernel is larger than the padded input")
    return (x.shape[0], w.shape[0], p, q)


_conv_params = {}  # (x shape, w shape, stride, padding, dilation, layout, epilogue, precision) -> jitune_conv2d_params
_CHANNELS_LAST_DTYPES = (torch.float16, torch.bfloat16)


def _precision_code(precision):
    return _lib.fp32_precision_code(precision, "jitune: conv2d: ")


def _conv_params_for(x, w, stride, padding, dilation, layout, epilogue=None, precision=0):
    key = (x.shape, w.shape, tuple(stride), tuple(padding), tuple(dilation), layout, epilogue, precision)
    params = _conv_params.get(key)
    if params is None:
        params = _lib.Conv2dParams.make()
        params.input[:] = list(x.shape)
        params.weight[:] = list(w.shape)
        params.stride[:] = list(stride)
        params.padding[:] = list(padding)
        params.dilation[:] = list(dilation)
        params.layout = layout
        params.epilogue = epilogue.encode() if epilogue else None  # the struct keeps the bytes alive
        params.precision = precision
        _conv_params[key] = params
    return params


_tensor_core_devices = {}  # torch.device -> whether it is sm_80 or newer


def _conv_channels_last(x, w, stride, dilation, precision="ieee") -> bool:
    """Whether conv2d runs x channels last and returns y in torch.channels_last, as F.conv2d does for such an input:
    float16 / bfloat16 on sm_80+ (the tensor-core NHWC kernels), float32 for a 3x3 filter of stride 1 and dilation 1
    (Winograd, algo 3) or with precision "tf32" on sm_80+ (the TF32 tensor-core kernel); otherwise NCHW (a
    channels-last x is copied)."""
    if not _is_nhwc(x):
        return False
    if x.dtype == torch.float32:
        if tuple(w.shape[2:]) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1):
            return True
        if precision != "tf32":
            return False
    elif x.dtype not in _CHANNELS_LAST_DTYPES:
        return False
    sm80 = _tensor_core_devices.get(x.device)
    if sm80 is None:
        sm80 = _tensor_core_devices[x.device] = torch.cuda.get_device_capability(x.device) >= (8, 0)
    return sm80


def _conv_cuda(x, w, bias, stride, padding, dilation, epilogue=None, residual=None, precision="ieee"):
    shape = _conv_check(x, w, bias, stride, padding, dilation)
    code = _precision_code(precision)
    nhwc = _conv_channels_last(x, w, stride, dilation, precision)
    out = _image_like(x, shape, nhwc)
    if residual is not None:
        _residual_check(residual, x, shape)
        fmt = torch.channels_last if nhwc else torch.contiguous_format
        residual = residual if residual.is_contiguous(memory_format=fmt) else residual.contiguous(memory_format=fmt)
    if out.numel() == 0:
        return out
    if nhwc:  # the weight as KRSC (channels-last models hold it so already)
        w = w if w.is_contiguous(memory_format=torch.channels_last) else w.contiguous(memory_format=torch.channels_last)
    else:
        x, w = _contiguous(x), _contiguous(w)
    bias_ptr = None if bias is None else _contiguous(bias).data_ptr()
    params = _conv_params_for(x, w, stride, padding, dilation, 1 if nhwc else 0, epilogue, code)
    dev = _device(x)
    rt = _handles.get(dev) or _runtime_for(dev)
    if epilogue is None:
        status = _C.jitune_conv2d(rt, x.data_ptr(), w.data_ptr(), bias_ptr, out.data_ptr(),
                                  ctypes.byref(params), _DTYPE[x.dtype], _raw_stream(dev))
    else:
        status = _C.jitune_conv2d_fused(rt, x.data_ptr(), w.data_ptr(), bias_ptr,
                                        None if residual is None else residual.data_ptr(), out.data_ptr(),
                                        ctypes.byref(params), _DTYPE[x.dtype], _raw_stream(dev))
    if status:
        _check(status)
    return out


def _residual_check(residual, x, shape):
    _need_same("conv2d", "residual", residual, "x", x)
    if tuple(residual.shape) != tuple(shape):
        _fail(f"conv2d: residual has shape {tuple(residual.shape)}; it must be the output's {tuple(shape)}")


def _conv_fake(x, w, bias, stride, padding, dilation, precision="ieee"):
    shape = _conv_check(x, w, bias, stride, padding, dilation)
    _precision_code(precision)
    return _image_like(x, shape, _conv_channels_last(x, w, stride, dilation, precision))


def _conv_plain_cuda(x, w, bias, stride, padding, dilation, precision="ieee"):
    return _conv_cuda(x, w, bias, stride, padding, dilation, None, None, precision)


def _conv_fused_cuda(x, w, bias, stride, padding, dilation, epilogue, residual, precision="ieee"):
    return _conv_cuda(x, w, bias, stride, padding, dilation, epilogue, residual, precision)


def _conv_fused_fake(x, w, bias, stride, padding, dilation, epilogue, residual, precision="ieee"):
    shape = _conv_check(x, w, bias, stride, padding, dilation)
    _precision_code(precision)
    if residual is not None:
        _residual_check(residual, x, shape)
    return _image_like(x, shape, _conv_channels_last(x, w, stride, dilation, precision))


def _conv_save(ctx, args, out):
    x, w, bias = args[0], args[1], args[2]
    ctx.save_for_backward(x, w)
    ctx.geometry = (list(args[3]), list(args[4]), list(args[5]))
    ctx.has_bias = bias is not None


def _conv_grads(ctx, grad):
    x, w = ctx.saved_tensors
    stride, padding, dilation = ctx.geometry
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_x = torch.nn.grad.conv2d_input(x.shape, w, grad, stride, padding, dilation)
    if ctx.needs_input_grad[1]:
        grad_w = torch.nn.grad.conv2d_weight(x, w.shape, grad, stride, padding, dilation)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        grad_b = grad.sum((0, 2, 3))
    return grad_x, grad_w, grad_b, None, None, None, None


def _conv_tensors(args):
    return (args[0], args[1]) if args[2] is None else (args[0], args[1], args[2])


_conv2d = _register("conv2d", "(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, "
                    "int[2] dilation, str precision=\"ieee\") -> Tensor", _conv_plain_cuda, _conv_fake, _conv_tensors,
                    _Derivative(_conv_save, _conv_grads))
# With an epilogue: no derivative (jitune does not differentiate expressions; the backward says so).
_conv2d_fused = _register("conv2d_fused", "(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, "
                          "int[2] dilation, str epilogue, Tensor? residual, str precision=\"ieee\") -> Tensor",
                          _conv_fused_cuda,
                          _conv_fused_fake, lambda args: tuple(t for t in (args[0], args[1], args[2], args[7])
                                                              if t is not None), None)


def _two(value):
    return [int(value[0]), int(value[1])] if isinstance(value, (list, tuple)) else [int(value), int(value)]


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride=1, padding=0,
           dilation=1, epilogue: Optional[str] = None, residual: Optional[torch.Tensor] = None,
           precision: str = "ieee") -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride, padding, dilation)`` with groups=1 (float32, float16, bfloat16). The
    input and weight gradients run PyTorch's (cuDNN's) backward convolutions, not jitune kernels.

    epilogue: an expression applied to every output in the same kernel, over ``acc`` (the convolution plus bias,
    as F.conv2d would return it) and ``r`` (the element of ``residual``, shaped like the output): ``"y = max(acc,
    0.0f)"`` is ``relu(conv2d(...))``, ``"y = max(acc + r, 0.0f)"`` is ``relu(conv2d(...) + residual)``, evaluated in
    float and rounded once. An op with an epilogue has no derivative.

    precision: ``"ieee"`` (the default) keeps float32 products exact; ``"tf32"`` lets a float32 convolution run on
    TF32 tensor cores (sm_80+; each input truncated to 10 mantissa bits, sums in float) where the tuner finds that
    faster, as ``torch.backends.cudnn.conv.fp32_precision = "tf32"`` lets cuDNN. float16 / bfloat16 ignore it. The
    backward convolutions follow PyTorch's own setting."""
    geometry = (_two(stride), _two(padding), _two(dilation))
    _precision_code(precision)
    if epilogue is None:
        if residual is not None:
            _fail("conv2d: a residual was given without an epilogue that reads it; pass e.g. epilogue='y = acc + r'")
        if _direct(x, weight) and (bias is None or _direct(bias)):
            return _conv_cuda(x, weight, bias, *geometry, None, None, precision)
        return _conv2d(x, weight, bias, *geometry, precision)
    if not isinstance(epilogue, str):
        _fail(f"conv2d: epilogue is {type(epilogue).__name__}; it is an expression text such as 'y = max(acc, 0.0f)'")
    if _direct(x, weight) and (bias is None or _direct(bias)) and (residual is None or _direct(residual)):
        return _conv_cuda(x, weight, bias, *geometry, epilogue, residual, precision)
    return _conv2d_fused(x, weight, bias, *geometry, epilogue, residual, precision)


# ---------------------------------------------------------------------------------------------------------------
# reduce_rows(Tensor x, str op) -> Tensor: sum or amax over the last dim

_REDUCE_OPS = {"sum": 0, "max": 1}


def _reduce_check(x, op):
    if op not in _REDUCE_OPS:
        _fail(f"reduce_rows: op '{op}'; it is 'sum' or 'max'")
    _need_float("reduce_rows", "x", x)
    if x.dim() < 1:
        _fail("reduce_rows: x is 0-dim; it reduces the last dim of a tensor with at least one")
    if op == "max" and x.shape[-1] == 0:
        _fail("reduce_rows: max over an empty last dim is undefined (torch.amax refuses it too)")


def _reduce_cuda(x, op):
    _reduce_check(x, op)
    shape = x.shape
    out = _empty(x, shape[:-1])
    cols = shape[-1]
    rows = out.numel()
    if rows == 0:
        return out
    if not x.is_contiguous():
        x = x.contiguous()
    dev = x.get_device()
    rt = _handles.get(dev) or _runtime_for(dev)
    call = _F.reduce_rows if _F else _C.jitune_reduce_rows
    status = call(rt, x.data_ptr(), out.data_ptr(), rows, cols, _REDUCE_OPS[op], _DTYPE[x.dtype], _raw_stream(dev))
    if status:
        _check(status)
    return out


def _reduce_fake(x, op):
    _reduce_check(x, op)
    return x.new_empty(x.shape[:-1])


def _reduce_save(ctx, args, out):
    ctx.op = args[1]
    if ctx.op == "max":
        ctx.save_for_backward(args[0], out)
    else:
        ctx.shape = args[0].shape


def _reduce_grads(ctx, grad):
    if ctx.op == "sum":
        return grad.unsqueeze(-1).expand(ctx.shape), None
    x, out = ctx.saved_tensors
    mask = (x == out.unsqueeze(-1)).to(grad.dtype)
    return grad.unsqueeze(-1) * mask / mask.sum(-1, keepdim=True), None


_reduce_rows = _register("reduce_rows", "(Tensor x, str op) -> Tensor", _reduce_cuda, _reduce_fake, _first,
                         _Derivative(_reduce_save, _reduce_grads))


def reduce_rows(x: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """``torch.sum(x, -1)`` (op "sum") or ``torch.amax(x, -1)`` (op "max"), accumulated in float32."""
    if _direct(x):
        return _reduce_cuda(x, op)
    return _reduce_rows(x, op)


def sum_rows(x: torch.Tensor) -> torch.Tensor:
    """``torch.sum(x, -1)``, accumulated in float32 and rounded once to x's dtype."""
    if _direct(x):
        return _reduce_cuda(x, "sum")
    return _reduce_rows(x, "sum")


def amax_rows(x: torch.Tensor) -> torch.Tensor:
    """``torch.amax(x, -1)``; NaN where a row holds a NaN."""
    if _direct(x):
        return _reduce_cuda(x, "max")
    return _reduce_rows(x, "max")
