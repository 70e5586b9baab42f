"""Permute peers: x.permute(p).contiguous() for the 14 public cases (bench-cases.md)."""
import torch

from .common import nonzero

SHAPES = (
    ((8192, 8192), (1, 0)),
    ((64, 1024, 1024), (0, 2, 1)),
    ((32, 512, 16, 128), (0, 2, 1, 3)),
    ((64, 64, 64, 64), (2, 3, 0, 1)),
    ((16, 64, 128, 128), (0, 2, 3, 1)),
    ((16, 128, 128, 64), (0, 3, 1, 2)),
    ((128, 128, 3, 3, 64), (4, 3, 2, 1, 0)),
)


def cases():
    out = []
    for dtype in ("float32", "float16"):
        for shape, perm in SHAPES:
            out.append(_case(dtype, shape, perm))
    for dtype in ("float32", "float16"):
        out.append(_identity(dtype, (4096, 4096)))
    return out


def _identity(dtype, shape):
    """An identity permute into an output buffer, as jitune's op writes one: out.copy_(x) (x.permute((0, 1))
    .contiguous() would return x itself and move nothing)."""
    def setup():
        x = nonzero(shape, getattr(torch, dtype))
        out = torch.empty_like(x)
        run = lambda: out.copy_(x.permute(0, 1))
        check = lambda: torch.equal(out, x)
        return run, check, (lambda t: t.permute(0, 1).clone(), (x,), lambda got: torch.equal(got, x))

    size = 2 if dtype == "float16" else 4
    return {"case": f"permute_{dtype}_{shape[0]}x{shape[1]}_01_identity", "setup": setup,
            "bytes": 2 * shape[0] * shape[1] * size, "op": "out.copy_(x)"}


def _case(dtype, shape, perm):
    name = f"permute_{dtype}_{'x'.join(map(str, shape))}_{''.join(map(str, perm))}"

    def setup():
        x = nonzero(shape, getattr(torch, dtype))
        res = [None]

        def run():
            res[0] = x.permute(perm).contiguous()

        def check(y=None):
            # Against an independent path: element (i0, i1, ...) of the output is x[i_perm^-1 ...], checked on the
            # CPU for a strided sample of output positions.
            y = res[0] if y is None else y
            if not y.is_contiguous() or tuple(y.shape) != tuple(shape[p] for p in perm):
                return False
            flat = y.reshape(-1)
            idx = torch.arange(0, flat.numel(), 9973, device="cuda")
            rem = idx.clone()
            src = torch.zeros_like(idx)
            strides = x.stride()
            for d in reversed(range(len(perm))):
                extent = shape[perm[d]]
                src += (rem % extent) * strides[perm[d]]
                rem //= extent
            return torch.equal(flat[idx], x.reshape(-1)[src])

        return run, check, (lambda t: t.permute(perm).contiguous(), (x,), check)

    size = 2 if dtype == "float16" else 4
    n = 1
    for s in shape:
        n *= s
    return {"case": name, "setup": setup, "bytes": 2 * n * size, "op": "x.permute(p).contiguous()"}
