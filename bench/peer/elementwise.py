"""Elementwise peers: torch.mul(out=) for z = x * y and torch.addcmul(out=) for out = a * b + c; for Inductor the
plain expressions x * y and a * b + c."""
import torch

from .common import nonzero


def cases():
    out = []
    for dtype in ("float32", "float16"):
        for n in (134217728, 1048576):
            out.append(_case(f"mul_{dtype}_{n}", dtype, n, 2))
    for dtype in ("float32", "float16"):
        out.append(_case(f"fma_{dtype}_134217728", dtype, 134217728, 3))
    return out


def _case(name, dtype, n, arity):
    def setup():
        dt = getattr(torch, dtype)
        ins = [nonzero(n, dt) for _ in range(arity)]
        res = torch.empty(n, device="cuda", dtype=dt)
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
