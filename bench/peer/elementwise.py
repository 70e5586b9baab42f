"""Elementwise peers: torch.mul(out=) for z = x * y and torch.addcmul(out=) for out = a * b + c; for Inductor the
plain expressions x * y and a * b + c. The misaligned cases (issue 19) read views a few elements into a larger
tensor (x[1:] style), as jitune's bench does."""
import torch

from .common import nonzero


def cases():
    out = []
    for dtype in ("float32", "float16"):
        for n in (134217728, 1048576):
            out.append(_case(f"mul_{dtype}_{n}", dtype, n, 2))
    for dtype in ("float32", "float16"):
        out.append(_case(f"fma_{dtype}_134217728", dtype, 134217728, 3))
    for name, dtype, n, offsets in offset_cases():
        out.append(_case(name, dtype, n, len(offsets) - 1, offsets))
    return out


def offset_cases():
    """The misaligned-view and one-element cases as (name, dtype, n, element offsets of (out, inputs...)): the
    same list as bench/cases_elementwise.cpp, shared with bench/python/bench_ops.py."""
    out = []
    for suffix, offsets in (("x+1", (0, 1, 0)), ("x+2", (0, 2, 0)), ("x+3", (0, 3, 0)), ("all+1", (1, 1, 1)),
                            ("x+1_y+3", (0, 1, 3))):
        for dtype, n in (("float16", 134217728), ("float32", 134217728), ("float16", 1048576)):
            if suffix != "x+1" and (dtype, n) != ("float16", 134217728):
                continue
            out.append((f"mul_{dtype}_{n}_{suffix}", dtype, n, offsets))
    out.append(("fma_float16_134217728_a+1", "float16", 134217728, (0, 1, 0, 0)))
    for dtype in ("float32", "float16"):  # one element: a launch each
        out.append((f"mul_{dtype}_1", dtype, 1, (0, 0, 0)))
    return out


def offset_view(n, dt, offset, make):
    """n elements `offset` elements into a tensor of n + offset (x[offset:], misaligned for vector access)."""
    return make(n + offset, dt)[offset:] if offset else make(n, dt)


def _case(name, dtype, n, arity, offsets=()):
    offsets = tuple(offsets) + (0,) * (arity + 1 - len(offsets))

    def setup():
        dt = getattr(torch, dtype)
        ins = [offset_view(n, dt, offsets[1 + a], nonzero) for a in range(arity)]
        res = offset_view(n, dt, offsets[0], lambda m, t: torch.empty(m, device="cuda", dtype=t))
        if arity == 2:
            run = lambda: torch.mul(ins[0], ins[1], out=res)
            check = lambda: torch.equal(res, ins[0] * ins[1])
            pure = (lambda x, y: x * y, ins, lambda got: torch.equal(got, ins[0] * ins[1]))
        else:
            run = lambda: torch.addcmul(ins[2], ins[0], ins[1], out=res)
            # Near-cancelling a * b + c needs an absolute tolerance too (fused vs separate rounding).
            close = lambda got: torch.allclose(got.float(), ins[0].float() * ins[1].float() + ins[2].float(),
                                               rtol=1e-2, atol=2e-2)
            check = lambda: close(res)
            pure = (lambda a, b, c: a * b + c, ins, close)
        return run, check, pure

    size = 2 if dtype == "float16" else 4
    return {"case": name, "setup": setup, "bytes": (arity + 1) * n * size,
            "op": "torch.mul(out=)" if arity == 2 else "torch.addcmul(out=)"}
