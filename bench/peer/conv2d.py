"""Conv2d peer: torch.nn.functional.conv2d (cuDNN; peer_torch.py sets cudnn.benchmark = True and TF32 off)."""
import torch
import torch.nn.functional as F

from .common import nonzero

# (N, C, H, W, K, R, stride, padding): bench-cases.md's conv rows (no padding, stride 1; the first is the seed
# article's case) in float32 and float16, then issue 18's network layers in float16 (templates/conv2d/conv2d.cpp's
# default suite, the same names).
ROWS = [(1, 6, 768, 512, 6, 6, 1, 0), (8, 3, 224, 224, 16, 3, 1, 0), (1, 16, 512, 512, 16, 3, 1, 0),
        (32, 4, 128, 128, 8, 5, 1, 0), (1, 64, 56, 56, 64, 3, 1, 0)]
NETWORK_ROWS = [(1, 64, 56, 56, 64, 3, 1, 1), (32, 64, 56, 56, 64, 3, 1, 1), (32, 128, 28, 28, 128, 3, 1, 1),
                (32, 256, 14, 14, 256, 3, 1, 1), (32, 512, 7, 7, 512, 3, 1, 1), (1, 256, 14, 14, 256, 3, 1, 1),
                (32, 256, 56, 56, 64, 1, 1, 0), (32, 128, 56, 56, 128, 3, 2, 1), (1, 320, 64, 64, 320, 3, 1, 1)]
# Channels last (x and the weight in torch.channels_last; cuDNN runs its NHWC kernels).
CHANNELS_LAST_ROWS = [(32, 64, 56, 56, 64, 3, 1, 1), (32, 256, 14, 14, 256, 3, 1, 1), (1, 320, 64, 64, 320, 3, 1, 1)]


def cases():
    return ([_case(dtype, *row) for dtype in ("float32", "float16") for row in ROWS] +
            [_case("float16", *row) for row in NETWORK_ROWS] +
            [_case("float16", *row, nhwc=True) for row in CHANNELS_LAST_ROWS])


def _case(dtype, n, c, h, w, k, r, stride, pad, nhwc=False):
    p, q = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - r) // stride + 1

    def setup():
        dt = getattr(torch, dtype)
        x = nonzero((n, c, h, w), dt)
        wt = nonzero((k, c, r, r), dt)
        if nhwc:
            x, wt = x.contiguous(memory_format=torch.channels_last), wt.contiguous(memory_format=torch.channels_last)
        run = lambda: F.conv2d(x, wt, stride=stride, padding=pad)
        ref = F.conv2d(x.double(), wt.double(), stride=stride, padding=pad)
        tol = 1e-4 if dtype == "float32" else 2e-3
        close = lambda got: torch.allclose(got.double(), ref, rtol=tol, atol=tol * c * r * r)
        check = lambda: close(run())
        return run, check, (lambda a, b: F.conv2d(a, b, stride=stride, padding=pad), (x, wt), close)

    size = 2 if dtype == "float16" else 4
    name = (f"conv_{dtype}_N{n}C{c}H{h}W{w}K{k}R{r}" + (f"S{stride}" if stride > 1 else "") +
            (f"P{pad}" if pad else "") + ("_nhwc" if nhwc else ""))
    return {"case": name, "setup": setup,
            "bytes": (n * c * h * w + k * c * r * r + n * k * p * q) * size,
            "flops": 2 * n * k * p * q * c * r * r, "op": "torch.nn.functional.conv2d"}
