"""The functional API: jitune's ops on torch, CuPy and JAX arrays (and anything with __cuda_array_interface__ or
__dlpack__), plus signature / explain / tune and the cache's export / import.

Each op mirrors the C++ op of the same name (include/jitune/ops/*.hpp) and its C function (jitune.h): it reads the
arrays without copying (jitune._arrays), checks what is cheap to check here (device, contiguity, shapes, dtypes;
the C library checks the rest and its message is raised as is), allocates the output with the first array's
framework when out=None, and queues the kernel on the stream (default: that framework's current stream). Ops are
asynchronous, as CUDA kernels are; the arrays must stay alive until the stream has run them (the framework's own
rule).

Every op has a signature, the canonical problem text the tuning caches are keyed by:
``signature("permute", x, (0, 2, 1))`` takes the same arguments as the op, with arrays or
``ShapeDtype(shape, dtype)`` placeholders (no GPU needed). ``explain`` says which configuration a call uses and
why; ``tune`` tunes one problem or a list on the GPU now.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from ctypes import byref, c_int32, c_int64, c_uint64, c_void_p

from . import _arrays, _runtime
from ._arrays import DTYPE_NAMES, FLOAT_DTYPES, INT32, INT64, Operand, convert
from ._lib import Conv2dParams, ImportReport as _ImportReportStruct, TuneResult as _TuneResultStruct
from ._lib import fp32_precision_code
from ._lib import UpsampleNearest2dShape, check, last_error, lib, text_call
from ._runtime import runtime_for
from .errors import ERROR_INVALID_ARGUMENT, InvalidArgumentError, error_for

__all__ = [
    "elementwise",
    "permute",
    "upsample_nearest2d",
    "upsample_nearest2d_backward",
    "index_add",
    "scatter_add",
    "dot",
    "conv2d",
    "reduce_rows",
    "sum_rows",
    "max_rows",
    "signature",
    "family",
    "explain",
    "tune",
    "TuneResult",
    "export_cache",
    "import_cache",
    "ImportReport",
    "OPS",
]

_CONTIGUOUS_HINT = "call .contiguous() (torch), cupy.ascontiguousarray or jnp.asarray first"


# --- Checks shared by the ops


def _contiguous(op, name: str) -> None:
    if not _arrays.is_contiguous(op.shape, op.strides):
        raise InvalidArgumentError(
            f"{name} is not contiguous (shape {tuple(op.shape)}, strides {tuple(op.strides)} in elements): this op "
            f"reads C-contiguous arrays; {_CONTIGUOUS_HINT}")


def _float_dtype(code: int, name: str) -> None:
    if code not in FLOAT_DTYPES:
        raise InvalidArgumentError(
            f"{name} has dtype {DTYPE_NAMES[code]}; this op takes float32, float16 or bfloat16")


def _same_dtype(op, code: int, name: str, other: str) -> None:
    if op.dtype != code:
        raise InvalidArgumentError(
            f"{name} has dtype {DTYPE_NAMES[op.dtype]} but {other} has {DTYPE_NAMES[code]}: they must match; "
            "convert one (e.g. .to(dtype) / .astype(dtype))")


def _out(op: Operand, shape, code: int, channels_last: bool = False) -> int:
    """Checks a caller's out= against what the op writes; returns its pointer."""
    if tuple(op.shape) != tuple(shape):
        raise InvalidArgumentError(
            f"out has shape {tuple(op.shape)} but this op writes shape {tuple(shape)}: pass an out of that shape "
            "or leave out=None")
    if op.dtype != code:
        raise InvalidArgumentError(
            f"out has dtype {DTYPE_NAMES[op.dtype]} but this op writes {DTYPE_NAMES[code]}: pass an out of that "
            "dtype or leave out=None")
    if channels_last:
        n, c, h, w = op.shape
        if not _arrays.is_contiguous((n, h, w, c), (op.strides[0], op.strides[2], op.strides[3], op.strides[1])):
            raise InvalidArgumentError(
                "out is not in channels_last layout like the input: pass "
                "torch.empty(..., memory_format=torch.channels_last) or leave out=None")
    elif not _arrays.is_contiguous(op.shape, op.strides):
        raise InvalidArgumentError(
            f"out is not contiguous (shape {tuple(op.shape)}, strides {tuple(op.strides)} in elements): jitune "
            f"writes C-contiguous outputs; {_CONTIGUOUS_HINT}")
    return op.ptr


def _output(out_op, framework, shape, code, device, stream, channels_last=False):
    """(pointer to write, Allocation or None) for out= or a new array."""
    if out_op is not None:
        return _out(out_op, shape, code, channels_last), None
    alloc = _arrays.allocate(framework, shape, code, device, stream, channels_last)
    return alloc.ptr, alloc


def _pair(value, name: str, cast=int):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise InvalidArgumentError(f"{name} must be one value or two (height, width); got {value!r}")
        return cast(value[0]), cast(value[1])
    return cast(value), cast(value)


def _finish(status, result):
    if status:
        check(status)
    return result


# --- elementwise


def _elementwise_problem(metas, out_meta, name_of):
    if metas:
        first = metas[0]
        for i, m in enumerate(metas):
            if tuple(m.shape) != tuple(first.shape):
                raise InvalidArgumentError(
                    f"{name_of(i)} has shape {tuple(m.shape)} but {name_of(0)} has {tuple(first.shape)}: elementwise "
                    "takes same-shaped arrays (no broadcasting); expand or reshape them first")
            if m.dtype != first.dtype:
                raise InvalidArgumentError(
                    f"{name_of(i)} has dtype {DTYPE_NAMES[m.dtype]} but {name_of(0)} has "
                    f"{DTYPE_NAMES[first.dtype]}: elementwise takes one dtype")
        return tuple(first.shape), first.dtype
    if out_meta is None:
        raise InvalidArgumentError("elementwise needs at least one input array, or out= to set the shape and dtype")
    return tuple(out_meta.shape), out_meta.dtype


def _broadcast(shapes):
    """PyTorch's broadcast of `shapes` (right-aligned, each size equal or 1), or None when they do not broadcast."""
    dims = max((len(s) for s in shapes), default=0)
    out = [1] * dims
    for s in shapes:
        for k, n in enumerate(s):
            d = dims - len(s) + k
            if n == 1:
                continue
            if out[d] not in (1, n):
                return None
            out[d] = n
    return tuple(out)


def _views_call(ops):
    """The elementwise_view key values for operands (output first): ndim, sizes, ndim, strides of each."""
    values = []
    for op in ops:
        strides = op.strides if op.strides is not None else _arrays.contiguous_strides(op.shape)
        values += [len(op.shape), *op.shape, len(strides), *strides]
    return values


def _elementwise_views(expression, ins, out, out_op, framework, device, stream):
    """Inputs that are not same-shaped and contiguous (broadcast, sliced, permuted, expanded): one elementwise_view
    kernel over the views as they are."""
    code = ins[0].dtype
    for i, op in enumerate(ins):
        _float_dtype(op.dtype, f"inputs[{i}]")
        if op.dtype != code:
            raise InvalidArgumentError(f"inputs[{i}] has dtype {DTYPE_NAMES[op.dtype]} but inputs[0] has "
                                       f"{DTYPE_NAMES[code]}: elementwise takes one dtype")
    shape = _broadcast([tuple(op.shape) for op in ins])
    if shape is None:
        raise InvalidArgumentError("elementwise: the input shapes " + ", ".join(str(tuple(op.shape)) for op in ins)
                                   + " do not broadcast (right-aligned, each size equal or 1)")
    if out_op is not None:  # any non-overlapping view of the broadcast shape (checked by libjitune)
        if tuple(out_op.shape) != shape or out_op.dtype != code:
            raise InvalidArgumentError(f"out has shape {tuple(out_op.shape)} and dtype {DTYPE_NAMES[out_op.dtype]} "
                                       f"but this call writes shape {shape}, dtype {DTYPE_NAMES[code]}")
        dst, alloc, out_view = out_op.ptr, None, out_op
    else:
        alloc = _arrays.allocate(framework, shape, code, device, stream, False)
        dst = alloc.ptr
        out_view = Operand(dst, shape, _arrays.contiguous_strides(shape), code, device, framework, None)
    if math.prod(shape) == 0:
        return alloc.result() if alloc else out
    values = [code, len(ins), 0] + _views_call([out_view, *ins])
    buffers = [op.ptr for op in ins] + [dst]
    status = lib.jitune_call(runtime_for(device), b"elementwise_view", (c_int64 * len(values))(*values),
                             len(values), expression.encode(), None, 0, (c_void_p * len(buffers))(*buffers),
                             len(buffers), stream)
    return _finish(status, alloc.result() if alloc else out)


def elementwise(expression: str, *inputs, out=None, stream=None):
    """out = expression over arrays of one dtype (float32, float16, bfloat16).

    expression: one C assignment with float math, e.g. "z = x * y + 1", "y = x > 0 ? x : 0.1f * x"; the inputs
    are the names read on the right-hand side, in order of first appearance (at most 8), given here in that order.
    Same-shaped contiguous arrays take the elementwise kernel. Others (shapes that broadcast by PyTorch's and
    NumPy's rule, sliced, permuted or expanded views, no negative strides) take one elementwise_view kernel over
    the views as they are; out= may then be any non-overlapping view of the broadcast shape.
    Returns out (a new contiguous array of the broadcast shape and the inputs' dtype when out=None).
    """
    named = [(f"inputs[{i}]", x, False) for i, x in enumerate(inputs)]
    named.append(("out", out, True))
    ops, device, stream, framework = convert(named, stream)
    ins, out_op = ops[:-1], ops[-1]
    regular = ins and all(tuple(op.shape) == tuple(ins[0].shape) and _arrays.is_contiguous(op.shape, op.strides)
                          for op in ins) and (out_op is None or _arrays.is_contiguous(out_op.shape, out_op.strides))
    if ins and not regular:
        return _elementwise_views(expression, ins, out, out_op, framework, device, stream)
    shape, code = _elementwise_problem(ins, out_op, lambda i: f"inputs[{i}]")
    dst, alloc = _output(out_op, framework, shape, code, device, stream)
    k = len(ins)
    ptrs = (c_void_p * max(k, 1))(*[op.ptr for op in ins])
    status = lib.jitune_elementwise(runtime_for(device), expression.encode(), ptrs, k, dst, math.prod(shape),
                                    code, stream)
    return _finish(status, alloc.result() if alloc else out)


def _sig_elementwise(expression: str, *inputs, out=None, stream=None):
    metas = [_arrays.meta(x, f"inputs[{i}]") for i, x in enumerate(inputs)]
    shape, code = _elementwise_problem(metas, _arrays.meta(out, "out") if out is not None else None,
                                       lambda i: f"inputs[{i}]")
    return text_call(lib.jitune_elementwise_signature, expression.encode(), math.prod(shape), code)


# --- permute


def _permute_problem(shape, perm):
    ndim = len(shape)
    try:
        perm = tuple(int(p) for p in perm)
    except TypeError:
        raise InvalidArgumentError(f"perm must be a sequence of dims; got {perm!r}") from None
    if len(perm) != ndim:
        raise InvalidArgumentError(f"perm {perm} has {len(perm)} entries but x has {ndim} dims: give one per dim")
    perm = tuple(p + ndim if p < 0 else p for p in perm)
    if sorted(perm) != list(range(ndim)):
        raise InvalidArgumentError(f"perm {perm} is not a permutation of 0..{ndim - 1}")
    return perm, tuple(shape[p] for p in perm), (c_int64 * ndim)(*shape), (c_int32 * ndim)(*perm)


def permute(x, perm, out=None, stream=None):
    """The contiguous copy of contiguous x with output dim i = input dim perm[i] (x.permute(perm).contiguous());
    any of the nine dtypes, up to 8 dims."""
    (xo, out_op), device, stream, framework = convert((("x", x, False), ("out", out, True)), stream)
    _contiguous(xo, "x")
    perm, out_shape, shape_arr, perm_arr = _permute_problem(xo.shape, perm)
    dst, alloc = _output(out_op, framework, out_shape, xo.dtype, device, stream)
    status = lib.jitune_permute(runtime_for(device), xo.ptr, dst, shape_arr, perm_arr, len(perm), xo.dtype, stream)
    return _finish(status, alloc.result() if alloc else out)


def _sig_permute(x, perm, out=None, stream=None):
    m = _arrays.meta(x, "x")
    perm, _, shape_arr, perm_arr = _permute_problem(m.shape, perm)
    return text_call(lib.jitune_permute_signature, shape_arr, perm_arr, len(perm), m.dtype)


# --- upsample_nearest2d

_LAYOUTS = {"nchw": 0, "nhwc": 1}
_MODES = {"nearest": 0, "nearest-exact": 1, "nearest_exact": 1}


def _image(shape, strides, is_torch, layout, name):
    """(layout code, n, c, h, w, logical NCHW dims with NHWC memory) of a 4-d image batch.

    layout None: NCHW, or NHWC for a torch.channels_last tensor (its dims stay N, C, H, W); "nchw" / "nhwc": the
    array's dims are in that order and it is C-contiguous.
    """
    if len(shape) != 4:
        raise InvalidArgumentError(f"{name} has {len(shape)} dims; upsample_nearest2d takes 4-d image batches")
    if layout is None:
        if is_torch and _arrays.torch_is_channels_last(shape, strides):
            n, c, h, w = shape
            return 1, n, c, h, w, True
        code = 0
    else:
        code = _LAYOUTS.get(str(layout).lower())
        if code is None:
            raise InvalidArgumentError(f"layout must be 'nchw' or 'nhwc' (or None); got {layout!r}")
    if not _arrays.is_contiguous(shape, strides):
        raise InvalidArgumentError(
            f"{name} is not contiguous (shape {tuple(shape)}, strides {strides} in elements): upsample_nearest2d reads "
            f"contiguous NCHW, contiguous NHWC (layout='nhwc') or torch.channels_last batches; {_CONTIGUOUS_HINT}")
    if code == 0:
        n, c, h, w = shape
    else:
        n, h, w, c = shape
    return code, n, c, h, w, False


def _upsample_problem(image, dtype, size, scale_factor, mode, backward_out=None):
    """The C shape struct and (out_h, out_w) for a forward call (backward_out: grad_output's (h, w))."""
    layout, n, c, h, w, _ = image
    mode_code = _MODES.get(str(mode).lower()) if isinstance(mode, str) else None
    if mode_code is None:
        raise InvalidArgumentError(f"mode must be 'nearest' or 'nearest-exact'; got {mode!r}")
    scale_h = scale_w = 0.0
    if scale_factor is not None:
        scale_h, scale_w = _pair(scale_factor, "scale_factor", float)
        if not (scale_h > 0 and scale_w > 0):
            raise InvalidArgumentError(f"scale_factor must be > 0; got {scale_factor!r}")
    if size is not None:
        out_h, out_w = _pair(size, "size")
    elif scale_factor is not None:
        # PyTorch's rule (F.interpolate): floor(in * scale) in double precision.
        out_h, out_w = math.floor(h * scale_h), math.floor(w * scale_w)
    elif backward_out is not None:
        out_h, out_w = backward_out
    else:
        raise InvalidArgumentError("upsample_nearest2d needs size= or scale_factor=")
    if backward_out is not None and (out_h, out_w) != tuple(backward_out):
        raise InvalidArgumentError(
            f"grad_output is {backward_out[0]} x {backward_out[1]} but size / scale_factor give {out_h} x {out_w}: "
            "pass the forward call's size or scale_factor")
    s = UpsampleNearest2dShape.make(n=n, c=c, in_h=h, in_w=w, out_h=out_h, out_w=out_w, scale_h=scale_h,
                                    scale_w=scale_w, layout=layout, mode=mode_code, dtype=dtype)
    return s, out_h, out_w


def _image_shape(image, h, w):
    layout, n, c, _, _, logical = image
    return (n, h, w, c) if layout == 1 and not logical else (n, c, h, w)


def upsample_nearest2d(x, size=None, scale_factor=None, mode="nearest", layout=None, out=None, stream=None):
    """F.interpolate(x, size=..., scale_factor=..., mode="nearest" | "nearest-exact") on a 4-d batch, bit-identical
    to PyTorch (float32, float16, bfloat16).

    layout None: x is NCHW-contiguous, or a torch.channels_last tensor (then NHWC is used and the output is
    channels_last too); "nchw" / "nhwc": x's dims are in that order, C-contiguous (e.g. an (N, H, W, C) JAX array
    with layout="nhwc"), and so are the output's. Giving both size and scale_factor is aten's
    upsample_nearest2d(input, output_size, scales): the size sets the shape, the factor the index rule.
    """
    (xo, out_op), device, stream, framework = convert((("x", x, False), ("out", out, True)), stream)
    image = _image(xo.shape, xo.strides, xo.framework == "torch", layout, "x")
    shape, out_h, out_w = _upsample_problem(image, xo.dtype, size, scale_factor, mode)
    dst, alloc = _output(out_op, framework, _image_shape(image, out_h, out_w), xo.dtype, device, stream,
                         channels_last=image[5])
    status = lib.jitune_upsample_nearest2d(runtime_for(device), byref(shape), xo.ptr, dst, stream)
    return _finish(status, alloc.result() if alloc else out)


def _input_size(input_size, image_go):
    layout, n, c, _, _, _ = image_go
    size = tuple(int(v) for v in input_size)
    if len(size) == 2:
        return size
    if len(size) != 4:
        raise InvalidArgumentError(f"input_size must be (N, C, H, W) or (H, W); got {input_size!r}")
    if size[0] != n or size[1] != c:
        raise InvalidArgumentError(
            f"input_size {size} (N, C, H, W) disagrees with grad_output's batch {n} and channels {c}")
    return size[2], size[3]


def upsample_nearest2d_backward(grad_output, input_size, size=None, scale_factor=None, mode="nearest",
                                layout=None, out=None, stream=None):
    """The gradient of upsample_nearest2d for grad_output: grad_input of the forward input's size (written, not
    accumulated), as PyTorch's CUDA upsample_nearest2d_backward.

    input_size: the forward input's (N, C, H, W) (or (H, W)); size / scale_factor / mode: the forward call's
    (size defaults to grad_output's spatial size); layout as in the forward.
    """
    (go, out_op), device, stream, framework = convert((("grad_output", grad_output, False), ("out", out, True)),
                                                      stream)
    image_go = _image(go.shape, go.strides, go.framework == "torch", layout, "grad_output")
    in_h, in_w = _input_size(input_size, image_go)
    image_in = image_go[:3] + (in_h, in_w) + image_go[5:]
    shape, _, _ = _upsample_problem(image_in, go.dtype, size, scale_factor, mode, image_go[3:5])
    dst, alloc = _output(out_op, framework, _image_shape(image_in, in_h, in_w), go.dtype, device, stream,
                         channels_last=image_go[5])
    status = lib.jitune_upsample_nearest2d_backward(runtime_for(device), byref(shape), go.ptr, dst, stream)
    return _finish(status, alloc.result() if alloc else out)


def _sig_upsample_nearest2d(x, size=None, scale_factor=None, mode="nearest", layout=None, out=None, stream=None):
    m = _arrays.meta(x, "x")
    image = _image(m.shape, m.strides, m.channels_last, layout, "x")
    shape, _, _ = _upsample_problem(image, m.dtype, size, scale_factor, mode)
    return text_call(lib.jitune_upsample_nearest2d_signature, byref(shape), 0)


def _sig_upsample_nearest2d_backward(grad_output, input_size, size=None, scale_factor=None, mode="nearest",
                                     layout=None, out=None, stream=None):
    m = _arrays.meta(grad_output, "grad_output")
    image_go = _image(m.shape, m.strides, m.channels_last, layout, "grad_output")
    in_h, in_w = _input_size(input_size, image_go)
    image_in = image_go[:3] + (in_h, in_w) + image_go[5:]
    shape, _, _ = _upsample_problem(image_in, m.dtype, size, scale_factor, mode, image_go[3:5])
    return text_call(lib.jitune_upsample_nearest2d_signature, byref(shape), 1)


# --- index_add, scatter_add, dot


def _index_dtype(code: int) -> None:
    if code not in (INT32, INT64):
        raise InvalidArgumentError(f"index has dtype {DTYPE_NAMES[code]}; it must be int32 or int64")


def _index_add_problem(dst, index, src):
    """(dst_rows, index_count, src_rows, row_length) of an index_add along dim 0."""
    _index_dtype(index.dtype)
    if len(index.shape) > 1:
        raise InvalidArgumentError(f"index has shape {tuple(index.shape)}; it must be 1-d")
    if len(dst.shape) == 0:
        raise InvalidArgumentError("dst is 0-d; index_add adds rows along dim 0 of an array with at least one dim")
    if len(src.shape) != len(dst.shape) or tuple(src.shape[1:]) != tuple(dst.shape[1:]):
        raise InvalidArgumentError(
            f"src has shape {tuple(src.shape)} but dst has {tuple(dst.shape)}: src must be (len(index),) + "
            "dst.shape[1:]")
    count = math.prod(index.shape)
    if src.shape[0] != count:
        raise InvalidArgumentError(f"src has {src.shape[0]} rows but index has {count} entries: they must match")
    if src.dtype != dst.dtype:
        raise InvalidArgumentError(
            f"src has dtype {DTYPE_NAMES[src.dtype]} but dst has {DTYPE_NAMES[dst.dtype]}: they must match")
    return dst.shape[0], count, src.shape[0], math.prod(dst.shape[1:])


def index_add(dst, index, src, alpha=1.0, check_indices=False, stream=None):
    """dst.index_add_(0, index, src, alpha=alpha), in place; returns dst. dst (R, ...), src (len(index), ...),
    index int32 / int64; float32, float16, bfloat16. check_indices: check every index on the host first (a
    stream synchronisation) and raise naming the first one out of range; without it such indices are skipped."""
    (do, io, so), device, stream, _ = convert((("dst", dst, True), ("index", index, False), ("src", src, False)),
                                              stream)
    for op, name in ((do, "dst"), (io, "index"), (so, "src")):
        _contiguous(op, name)
    rows, count, src_rows, row_length = _index_add_problem(do, io, so)
    status = lib.jitune_index_add(runtime_for(device), do.ptr, rows, io.ptr, count, io.dtype, so.ptr, src_rows,
                                  row_length, do.dtype, float(alpha), int(bool(check_indices)), stream)
    return _finish(status, dst)


def _sig_index_add(dst, index, src, alpha=1.0, check_indices=False, stream=None):
    d, i, s = _arrays.meta(dst, "dst"), _arrays.meta(index, "index"), _arrays.meta(src, "src")
    rows, count, _, row_length = _index_add_problem(d, i, s)
    return text_call(lib.jitune_index_add_signature, rows, count, row_length, d.dtype, i.dtype)


def _scatter_add_problem(dst, index, src):
    _index_dtype(index.dtype)
    for m, name in ((dst, "dst"), (index, "index"), (src, "src")):
        if len(m.shape) != 1:
            raise InvalidArgumentError(f"{name} has shape {tuple(m.shape)}; scatter_add takes 1-d arrays")
    if src.dtype != dst.dtype:
        raise InvalidArgumentError(
            f"src has dtype {DTYPE_NAMES[src.dtype]} but dst has {DTYPE_NAMES[dst.dtype]}: they must match")
    if index.shape[0] > src.shape[0]:
        raise InvalidArgumentError(
            f"index has {index.shape[0]} entries but src only {src.shape[0]}: src must be at least as long")
    return dst.shape[0], index.shape[0], src.shape[0]


def scatter_add(dst, index, src, alpha=1.0, check_indices=False, stream=None):
    """1-d dst.scatter_add_(0, index, src) with alpha (dst[index[i]] += alpha * src[i] for i < len(index); src may
    be longer), in place; returns dst."""
    (do, io, so), device, stream, _ = convert((("dst", dst, True), ("index", index, False), ("src", src, False)),
                                              stream)
    for op, name in ((do, "dst"), (io, "index"), (so, "src")):
        _contiguous(op, name)
    count_dst, count, count_src = _scatter_add_problem(do, io, so)
    status = lib.jitune_scatter_add(runtime_for(device), do.ptr, count_dst, io.ptr, count, io.dtype, so.ptr,
                                    count_src, do.dtype, float(alpha), int(bool(check_indices)), stream)
    return _finish(status, dst)


def _sig_scatter_add(dst, index, src, alpha=1.0, check_indices=False, stream=None):
    d, i, s = _arrays.meta(dst, "dst"), _arrays.meta(index, "index"), _arrays.meta(src, "src")
    count_dst, count, count_src = _scatter_add_problem(d, i, s)
    return text_call(lib.jitune_scatter_add_signature, count_dst, count, count_src, d.dtype, i.dtype)


def _dot_problem(x, y):
    if tuple(x.shape) != tuple(y.shape):
        raise InvalidArgumentError(f"x has shape {tuple(x.shape)} but y has {tuple(y.shape)}: dot takes equal shapes")
    if x.dtype != y.dtype:
        raise InvalidArgumentError(
            f"x has dtype {DTYPE_NAMES[x.dtype]} but y has {DTYPE_NAMES[y.dtype]}: they must match")
    return math.prod(x.shape)


def dot(x, y, out=None, stream=None):
    """sum(x * y) over all elements, accumulated in float and rounded once to the inputs' dtype (float32, float16,
    bfloat16); returns a 0-d array (or out, any one-element array)."""
    (xo, yo, out_op), device, stream, framework = convert((("x", x, False), ("y", y, False), ("out", out, True)),
                                                          stream)
    _contiguous(xo, "x")
    _contiguous(yo, "y")
    n = _dot_problem(xo, yo)
    if out_op is not None:
        if out_op.numel != 1 or out_op.dtype != xo.dtype:
            raise InvalidArgumentError(
                f"out has shape {tuple(out_op.shape)} and dtype {DTYPE_NAMES[out_op.dtype]}; dot writes one element "
                f"of {DTYPE_NAMES[xo.dtype]}")
        dst, alloc = out_op.ptr, None
    else:
        dst, alloc = _output(None, framework, (), xo.dtype, device, stream)
    status = lib.jitune_dot(runtime_for(device), xo.ptr, yo.ptr, n, dst, xo.dtype, stream)
    return _finish(status, alloc.result() if alloc else out)


def _sig_dot(x, y, out=None, stream=None):
    xm, ym = _arrays.meta(x, "x"), _arrays.meta(y, "y")
    return text_call(lib.jitune_dot_signature, _dot_problem(xm, ym), xm.dtype)


# --- conv2d


_CONV_LAYOUTS = {"nchw": 0, "nhwc": 1}


def _conv2d_problem(x, w, bias, stride, padding, dilation, layout="nchw", epilogue=None, precision="ieee"):
    """The jitune_conv2d_params of a call and the stored output shape. layout "nhwc": x is stored (N, H, W, C), w
    (K, R, S, C) and y (N, P, Q, K)."""
    if epilogue is not None and not isinstance(epilogue, str):
        raise InvalidArgumentError(f"epilogue is {type(epilogue).__name__}; it is an expression text such as "
                                   "'y = max(acc + r, 0.0f)', or None")
    if layout not in _CONV_LAYOUTS:
        raise InvalidArgumentError(f"layout {layout!r}; it is 'nchw' or 'nhwc' (channels last)")
    nhwc = layout == "nhwc"
    if len(x.shape) != 4:
        raise InvalidArgumentError(f"x has shape {tuple(x.shape)}; conv2d takes a 4-d "
                                   f"{'(N, H, W, C)' if nhwc else '(N, C, H, W)'} batch")
    if len(w.shape) != 4:
        raise InvalidArgumentError(f"w has shape {tuple(w.shape)}; conv2d takes 4-d "
                                   f"{'(K, R, S, C)' if nhwc else '(K, C, R, S)'} filters")
    if w.dtype != x.dtype:
        raise InvalidArgumentError(
            f"w has dtype {DTYPE_NAMES[w.dtype]} but x has {DTYPE_NAMES[x.dtype]}: they must match")
    if bias is not None:
        if tuple(bias.shape) != (w.shape[0],):
            raise InvalidArgumentError(f"bias has shape {tuple(bias.shape)}; it must be ({w.shape[0]},) (K)")
        if bias.dtype != x.dtype:
            raise InvalidArgumentError(
                f"bias has dtype {DTYPE_NAMES[bias.dtype]} but x has {DTYPE_NAMES[x.dtype]}: they must match")
    p = Conv2dParams.make()
    logical = (lambda s: (s[0], s[3], s[1], s[2])) if nhwc else tuple  # stored -> (N, C, H, W) / (K, C, R, S)
    p.input[:] = logical(tuple(x.shape))
    p.weight[:] = logical(tuple(w.shape))
    p.stride[:] = _pair(stride, "stride")
    p.padding[:] = _pair(padding, "padding")
    p.dilation[:] = _pair(dilation, "dilation")
    p.layout = _CONV_LAYOUTS[layout]
    p.epilogue = epilogue.encode() if epilogue else None
    p.precision = fp32_precision_code(precision)
    out_shape = (c_int64 * 4)()
    check(lib.jitune_conv2d_output_shape(byref(p), out_shape))
    n, k, h, w_ = tuple(out_shape)
    return p, ((n, h, w_, k) if nhwc else (n, k, h, w_))


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, out=None, stream=None, layout="nchw", epilogue=None,
           residual=None, precision="ieee"):
    """F.conv2d(x, w, bias, stride, padding, dilation) (groups = 1) on contiguous NCHW x (N, C, H, W), w (K, C, R,
    S), bias (K,) or None; float32, float16, bfloat16. Returns y (N, K, P, Q). layout="nhwc" (channels last,
    float16 / bfloat16 on sm_80+): x (N, H, W, C), w (K, R, S, C), y (N, P, Q, K).

    epilogue: an expression applied to every output in the same kernel, over acc (the convolution plus bias as
    stored) and r (the element of `residual`, an array shaped and laid out as y): "y = max(acc + r, 0.0f)". The
    residual must not be `out`.

    precision: "ieee" (the default) keeps float32 products exact; "tf32" lets a float32 convolution run on TF32
    tensor cores (sm_80+; each input truncated to 10 mantissa bits, sums in float) where that is faster, like
    PyTorch's torch.backends.cudnn.conv.fp32_precision = "tf32". float16 / bfloat16 ignore it."""
    (xo, wo, bo, ro, out_op), device, stream, framework = convert(
        (("x", x, False), ("w", w, False), ("bias", bias, False), ("residual", residual, False), ("out", out, True)),
        stream)
    for op, name in ((xo, "x"), (wo, "w"), (bo, "bias"), (ro, "residual")):
        if op is not None:
            _contiguous(op, name)
    params, out_shape = _conv2d_problem(xo, wo, bo, stride, padding, dilation, layout, epilogue, precision)
    if ro is not None:
        if tuple(ro.shape) != tuple(out_shape):
            raise InvalidArgumentError(f"residual has shape {tuple(ro.shape)}; it must be the output's {tuple(out_shape)}")
        if ro.dtype != xo.dtype:
            raise InvalidArgumentError(
                f"residual has dtype {DTYPE_NAMES[ro.dtype]} but x has {DTYPE_NAMES[xo.dtype]}: they must match")
    dst, alloc = _output(out_op, framework, out_shape, xo.dtype, device, stream)
    status = lib.jitune_conv2d_fused(runtime_for(device), xo.ptr, wo.ptr, bo.ptr if bo is not None else None,
                                     ro.ptr if ro is not None else None, dst, byref(params), xo.dtype, stream)
    return _finish(status, alloc.result() if alloc else out)


def _sig_conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, out=None, stream=None, layout="nchw", epilogue=None,
                residual=None, precision="ieee"):
    xm, wm = _arrays.meta(x, "x"), _arrays.meta(w, "w")
    bm = _arrays.meta(bias, "bias") if bias is not None else None
    params, _ = _conv2d_problem(xm, wm, bm, stride, padding, dilation, layout, epilogue, precision)
    return text_call(lib.jitune_conv2d_signature, byref(params), xm.dtype, int(bias is not None))


# --- reduce_rows

_REDUCE_OPS = {"sum": 0, "max": 1, "amax": 1}


def _reduce_problem(x, op):
    code = _REDUCE_OPS.get(op) if isinstance(op, str) else None
    if code is None:
        raise InvalidArgumentError(f"op must be 'sum' or 'max'; got {op!r}")
    if len(x.shape) == 0:
        raise InvalidArgumentError("x is 0-d; reduce_rows reduces the last dim of an array with at least one dim")
    return code, math.prod(x.shape[:-1]), x.shape[-1], tuple(x.shape[:-1])


def reduce_rows(x, op="sum", out=None, stream=None):
    """torch.sum(x, -1) (op="sum") or torch.amax(x, -1) (op="max") over the last dim of contiguous x, accumulated
    in float (float32, float16, bfloat16); the output has x.shape[:-1] and x's dtype."""
    (xo, out_op), device, stream, framework = convert((("x", x, False), ("out", out, True)), stream)
    _contiguous(xo, "x")
    code, rows, cols, out_shape = _reduce_problem(xo, op)
    dst, alloc = _output(out_op, framework, out_shape, xo.dtype, device, stream)
    status = lib.jitune_reduce_rows(runtime_for(device), xo.ptr, dst, rows, cols, code, xo.dtype, stream)
    return _finish(status, alloc.result() if alloc else out)


def sum_rows(x, out=None, stream=None):
    """reduce_rows(x, "sum"): torch.sum(x, -1)."""
    return reduce_rows(x, "sum", out, stream)


def max_rows(x, out=None, stream=None):
    """reduce_rows(x, "max"): torch.amax(x, -1) (NaN-propagating)."""
    return reduce_rows(x, "max", out, stream)


def _sig_reduce_rows(x, op="sum", out=None, stream=None):
    m = _arrays.meta(x, "x")
    code, rows, cols, _ = _reduce_problem(m, op)
    return text_call(lib.jitune_reduce_rows_signature, rows, cols, code, m.dtype)


def _sig_sum_rows(x, out=None, stream=None):
    return _sig_reduce_rows(x, "sum")


def _sig_max_rows(x, out=None, stream=None):
    return _sig_reduce_rows(x, "max")


# --- signature, explain, tune

# op name -> (family, signature function taking the op's arguments)
OPS = {
    "elementwise": ("elementwise", _sig_elementwise),
    "permute": ("permute", _sig_permute),
    "upsample_nearest2d": ("upsample_nearest2d", _sig_upsample_nearest2d),
    "upsample_nearest2d_backward": ("upsample_nearest2d", _sig_upsample_nearest2d_backward),
    "index_add": ("scatter_add", _sig_index_add),
    "scatter_add": ("scatter_add", _sig_scatter_add),
    "dot": ("scatter_add", _sig_dot),
    "conv2d": ("conv2d", _sig_conv2d),
    "reduce_rows": ("reduce_rows", _sig_reduce_rows),
    "sum_rows": ("reduce_rows", _sig_sum_rows),
    "max_rows": ("reduce_rows", _sig_max_rows),
}
_FAMILIES = {"elementwise", "permute", "upsample_nearest2d", "scatter_add", "conv2d", "reduce_rows"}


def _lookup(op):
    if callable(op):
        op = getattr(op, "__name__", op)
    entry = OPS.get(op)
    if entry is None:
        raise InvalidArgumentError(f"unknown op {op!r}; jitune's ops are {', '.join(OPS)}")
    return op, entry


def family(op) -> str:
    """The kernel family an op runs in ("index_add" -> "scatter_add")."""
    return _lookup(op)[1][0]


def signature(op, *args, **kwargs) -> str:
    """The canonical problem signature of ``op(*args, **kwargs)`` (the key of the tuning caches), from shapes and
    dtypes only: arrays anywhere (host arrays too) or ShapeDtype placeholders. `op` is an op's name or the op."""
    _, (_, fn) = _lookup(op)
    return fn(*args, **kwargs)


def _problem(op, args, kwargs, signature_text=None, device=None):
    """(op name, family, signature, device) of an explain / tune request."""
    if signature_text is not None:
        if args or kwargs:
            raise InvalidArgumentError("give either signature= or the op's arguments, not both")
        fam = op if op in _FAMILIES else family(op)
        name = op
    else:
        name, (fam, fn) = _lookup(op)
        signature_text = fn(*args, **kwargs)
    if device is None:
        device = 0
        for a in list(args) + list(kwargs.values()):
            d = _arrays.device_of(a) if a is not None and not isinstance(a, (int, float, str, tuple, list)) else None
            if d is not None:
                device = d
                break
    return name, fam, signature_text, device


def explain(op, *args, signature=None, device=None, **kwargs) -> dict:
    """Which configuration ``op(*args, **kwargs)`` uses on `device` (default: the arrays' device, else 0), and why:
    the JSON object of `jitune explain --json` ("config", "level", "source", "time_us", "notes", ...). With
    signature= give a family (or op) and a signature text instead of arguments."""
    _, fam, sig, device = _problem(op, args, kwargs, signature, device)
    text = text_call(lib.jitune_explain, runtime_for(device), fam.encode(), sig.encode())
    return json.loads(text)


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """What tuning one problem found (the winner is stored in the user cache and used from then on)."""

    op: str
    family: str
    signature: str
    device: int
    best_us: float
    default_us: float
    candidates: int
    failed: int
    stored: bool
    wall_s: float
    config: str
    heuristic_config: str

    @property
    def speedup(self) -> float:
        """The heuristic default's time over the winner's."""
        return self.default_us / self.best_us if self.best_us > 0 else float("nan")


def _tune_one(op, args, kwargs, budget, device, signature_text=None) -> TuneResult:
    name, fam, sig, device = _problem(op, args, kwargs, signature_text, device)
    r = _TuneResultStruct.make()
    check(lib.jitune_tune(runtime_for(device), fam.encode(), sig.encode(), int(budget), byref(r)))
    return TuneResult(op=name, family=fam, signature=sig, device=device, best_us=r.best_us, default_us=r.default_us,
                      candidates=r.candidates, failed=r.failed, stored=bool(r.stored), wall_s=r.wall_s,
                      config=r.config.decode(), heuristic_config=r.heuristic_config.decode())


def _progress(items, what):
    if not sys.stderr.isatty():
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=what, unit="problem", file=sys.stderr)


def tune(op, *args, budget=0, device=None, signature=None, **kwargs):
    """Tunes problems on the GPU now (verifying every candidate, timing the correct ones) and stores the winners in
    the user cache; later calls use them.

    ``tune("permute", x, (0, 2, 1), budget=64)`` -> TuneResult; ``tune([("permute", (x, (0, 2, 1))), ("dot", (x,
    y), {}), ...], budget=...)`` -> [TuneResult, ...] with a tqdm progress bar when tqdm is installed and stderr is
    a terminal. budget > 0: that many candidates (a random sample with the heuristic default); 0: 48; < 0: the
    whole legal space. Arrays may be ShapeDtype placeholders; device defaults to the arrays' device, else 0.
    """
    if isinstance(op, (list, tuple)):
        if args or kwargs or signature is not None:
            raise InvalidArgumentError("tune(list) takes only budget= and device= besides the list")
        jobs = []
        for item in op:
            if not isinstance(item, (list, tuple)) or not 1 <= len(item) <= 3:
                raise InvalidArgumentError(f"each problem is (op, args) or (op, args, kwargs); got {item!r}")
            name = item[0]
            a = tuple(item[1]) if len(item) > 1 else ()
            kw = dict(item[2]) if len(item) > 2 else {}
            jobs.append((name, a, kw))
        return [_tune_one(name, a, kw, budget, device) for name, a, kw in _progress(jobs, "jitune tune")]
    return _tune_one(op, args, kwargs, budget, device, signature)


# --- Cache export / import


@dataclasses.dataclass(frozen=True)
class ImportReport:
    """How an import went: new records, records replaced by faster incoming ones, records kept, rejected lines."""

    added: int
    replaced: int
    kept: int
    rejected: int


def _cache_arg(cache):
    if cache is None:
        cache = _runtime.settings().user_cache
    return os.fsencode(cache) if cache is not None else None


def export_cache(file, cache=None) -> int:
    """Writes every record of tuning database `cache` (default: the user cache runtimes use) to `file` as JSON
    Lines (`jitune cache export`); returns how many. Needs no GPU. Only a regular file at `file` is replaced (a
    symbolic link, folder, FIFO or device there raises StoreError, nothing written)."""
    n = c_uint64(0)
    check(lib.jitune_cache_export(_cache_arg(cache), os.fsencode(file), byref(n)))
    return n.value


def import_cache(file, cache=None) -> ImportReport:
    """Imports JSON Lines `file` into tuning database `cache` (default: the user cache runtimes use; created when
    missing): new keys are added, a record already stored is never replaced (`jitune cache import --trust` does
    that), times no GPU could reach are rejected; then the runtimes' decisions reload. Needs no GPU. When lines are
    rejected the valid ones are still imported and InvalidArgumentError is raised, its ``.report`` holding the
    counts."""
    r = _ImportReportStruct.make()
    status = lib.jitune_cache_import(_cache_arg(cache), os.fsencode(file), byref(r))
    report = ImportReport(added=r.added, replaced=r.replaced, kept=r.kept, rejected=r.rejected)
    error = error_for(status, last_error()) if status else None  # read before other calls reset it
    if error is not None and not (status == ERROR_INVALID_ARGUMENT and report.rejected):
        raise error
    _runtime.reload()  # the valid records are in: runtimes must look again
    if error is not None:
        error.report = report
        raise error
    return report

