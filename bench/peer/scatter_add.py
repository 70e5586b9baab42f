"""scatter_add peers: tgt.index_add_(0, idx, src) for the index_add rows and the contention sweep, torch.dot(out=)
for dot. Indices are torch.randperm(count) % rows (random order, every row the same number of sources to within
one), as in jitune's workload. Bytes: source and index read once, destination written once (dot: both vectors)."""
import math

import torch

from .common import nonzero

N = 1 << 24


def cases():
    out = []
    for dtype in ("float32", "float16", "bfloat16"):
        out.append(_index_add(dtype, N, 65536, 1))
    for dtype in ("float16", "float32"):
        for per in (1, 2, 4, 16, 64):
            out.append(_index_add(dtype, N, N // per, 1))
    for per in (1, 4, 64):
        out.append(_index_add("bfloat16", N, N // per, 1))
    out.append(_index_add("float16", N // 64, 16384, 64))
    out.append(_index_add("float16", N // 256, 16384, 256))
    for dtype in ("float16", "bfloat16"):
        out.append(_dot(dtype, N))
    return out


def _tolerance(dtype, contributions, rms):
    # jitune's accumulation_check: 12 standard deviations of the rounding walk plus two units of the result.
    u = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}[dtype]
    return 12 * u * rms * contributions / math.sqrt(6) + u * rms, 2 * u


def _index_add(dtype, count, rows, row_length):
    name = f"index_add_{dtype}_{count}" + (f"x{row_length}" if row_length > 1 else "") + f"_into_{rows}"

    def setup():
        dt = getattr(torch, dtype)
        shape = (count,) if row_length == 1 else (count, row_length)
        tshape = (rows,) if row_length == 1 else (rows, row_length)
        idx = torch.randperm(count, device="cuda") % rows
        src = nonzero(shape, dt)
        tgt = nonzero(tshape, dt)
        expected = tgt.double().index_add_(0, idx, src.double())
        atol, rtol = _tolerance(dtype, -(-count // rows) + 1, 2.39)
        run = lambda: tgt.index_add_(0, idx, src)
        check = lambda: torch.allclose(tgt.double(), expected, rtol=rtol, atol=atol)
        # Inductor: the same in-place op on a copy of the destination (the eager runs keep adding into tgt).
        tgt2 = tgt.clone()
        pure = (lambda t, i, s: t.index_add_(0, i, s), (tgt2, idx, src),
                lambda got: torch.allclose(got.double(), expected, rtol=rtol, atol=atol))
        return run, check, pure

    size = 4 if dtype == "float32" else 2
    return {"case": name, "setup": setup, "bytes": count * (row_length * size + 8) + rows * row_length * size,
            "op": "tgt.index_add_(0, idx, src)"}


def _dot(dtype, n):
    def setup():
        dt = getattr(torch, dtype)
        x, y = nonzero(n, dt), nonzero(n, dt)
        res = torch.empty((), device="cuda", dtype=dt)
        expected = torch.dot(x.double(), y.double())
        atol, rtol = _tolerance("float32", n, 5.69)
        run = lambda: torch.dot(x, y, out=res)
        near = lambda got: bool(abs(got.double() - expected) <= atol + 2 * rtol * abs(expected)
                                + abs(expected) * 2.0 ** -7)
        check = lambda: near(res)
        return run, check, (lambda a, b: torch.dot(a, b), (x, y), near)

    size = 2
    return {"case": f"dot_{dtype}_{n}", "setup": setup, "bytes": 2 * n * size + size, "op": "torch.dot(out=)"}
