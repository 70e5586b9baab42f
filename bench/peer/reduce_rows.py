"""reduce_rows peers: torch.sum(x, -1, out=) and torch.amax(x, -1, out=) for the 16 cases of the family's suite,
two of them inputs one element into their allocation."""
import torch

from .common import nonzero

# (op, dtype, rows, cols), as ReduceRowsFamily::default_suite lists them; then its views.
CASES = (
    ("sum", "float32", 4096, 4096), ("max", "float32", 4096, 4096),
    ("sum", "float16", 4096, 4096), ("sum", "float32", 65536, 1024),
    ("max", "bfloat16", 65536, 1024), ("sum", "float32", 1048576, 64),
    ("max", "float16", 1048576, 32), ("sum", "float32", 8, 65536),
    ("max", "float16", 8, 65536), ("sum", "float32", 1024, 65536),
    ("sum", "bfloat16", 1024, 65536), ("max", "float32", 1024, 65536),
    ("sum", "float16", 4096, 50257), ("max", "float32", 65536, 1001),
)

# x as a view one element into its allocation (issue 19: "_x+1"): the suite's cases of x's alignment class.
VIEWS = (("sum", "float32", 4096, 4096, 1), ("sum", "float16", 4096, 4096, 1))

# Relative tolerance of a sum by output dtype (one rounding of the result); the absolute part grows with the row.
RTOL = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}


def cases():
    return [_case(*c) for c in CASES] + [_case(*v) for v in VIEWS]


def _case(op, dtype, rows, cols, offset=0):
    name = f"reduce_rows_{op}_{dtype}_{rows}x{cols}" + (f"_x+{offset}" if offset else "")

    def setup():
        dt = getattr(torch, dtype)
        x = nonzero((rows * cols + offset,), dt)[offset:].view(rows, cols)
        res = torch.empty(rows, device="cuda", dtype=dt)
        if op == "sum":
            run = lambda: torch.sum(x, -1, out=res)
            # Against the float64 sum: a float accumulation in another order, rounded once to the dtype.
            good = lambda got: torch.allclose(got.double(), x.double().sum(-1), rtol=RTOL[dtype],
                                              atol=cols * 2.0**-20)
            pure = (lambda t: t.sum(-1), (x,), good)
        else:
            run = lambda: torch.amax(x, -1, out=res)
            good = lambda got: torch.equal(got, x.float().max(-1).values.to(dt))  # max picks an element: exact
            pure = (lambda t: t.amax(-1), (x,), good)
        check = lambda: good(res)
        return run, check, pure

    size = 4 if dtype == "float32" else 2
    return {"case": name, "setup": setup, "bytes": (rows * cols + rows) * size,
            "op": f"torch.{'sum' if op == 'sum' else 'amax'}(x, -1, out=)"}
