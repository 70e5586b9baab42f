"""Conv2d peer: torch.nn.functional.conv2d (cuDNN; peer_torch.py sets cudnn.benchmark = True and TF32 off)."""
import torch
import torch.nn.functional as F

from .common import nonzero

# (N, C, H, W, K, R): bench-cases.md's conv rows, no padding, stride 1; the first is the seed article's case.
ROWS = [(1, 6, 768, 512, 6, 6), (8, 3, 224, 224, 16, 3), (1, 16, 512, 512, 16, 3), (32, 4, 128, 128, 8, 5),
        (1, 64, 56, 56, 64, 3)]


def cases():
    return [_case(dtype, *row) for dtype in ("float32", "float16") for row in ROWS]


def _case(dtype, n, c, h, w, k, r):
    p, q = h - r + 1, w - r + 1

    def setup():
        dt = getattr(torch, dtype)
        x = nonzero((n, c, h, w), dt)
        wt = nonzero((k, c, r, r), dt)
        run = lambda: F.conv2d(x, wt)
        ref = F.conv2d(x.double(), wt.double())
        tol = 1e-4 if dtype == "float32" else 2e-3
        close = lambda got: torch.allclose(got.double(), ref, rtol=tol, atol=tol * c * r * r)
        check = lambda: close(run())
        return run, check, (lambda a, b: F.conv2d(a, b), (x, wt), close)

    size = 2 if dtype == "float16" else 4
    return {"case": f"conv_{dtype}_N{n}C{c}H{h}W{w}K{k}R{r}", "setup": setup,
            "bytes": (n * c * h * w + k * c * r * r + n * k * p * q) * size,
            "flops": 2 * n * k * p * q * c * r * r, "op": "torch.nn.functional.conv2d"}
