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
                (32, 256, 56, 56, 64, 1, 1, 0), (32, 128, 56, 56, 128, 3, 2, 1), (1, 320, 64, 64, 320, 3, 1, 1),
                (32, 64, 56, 56, 256, 1, 1, 0), (32, 1024, 14, 14, 256, 1, 1, 0)]
# Channels last (x and the weight in torch.channels_last; cuDNN runs its NHWC kernels).
CHANNELS_LAST_ROWS = [(32, 64, 56, 56, 64, 3, 1, 1), (32, 256, 14, 14, 256, 3, 1, 1), (1, 320, 64, 64, 320, 3, 1, 1)]
# float32 network layers (issue 18 item 3: Winograd beside the direct kernel; cuDNN with TF32 off): the 3x3 rows of
# stride 1 above, then the first channels-last one.
FLOAT32_ROWS = [(1, 64, 56, 56, 64, 3, 1, 1), (32, 64, 56, 56, 64, 3, 1, 1), (32, 128, 28, 28, 128, 3, 1, 1),
                (32, 256, 14, 14, 256, 3, 1, 1), (32, 512, 7, 7, 512, 3, 1, 1), (1, 256, 14, 14, 256, 3, 1, 1)]
FLOAT32_CHANNELS_LAST_ROWS = [(32, 64, 56, 56, 64, 3, 1, 1)]
# The same float32 layers where the caller allows TF32 (issue 18 item 3's opt-in, "_tf32"): jitune's precision="tf32"
# against cuDNN with torch.backends.cudnn.allow_tf32 on for that case (peer_torch.py reads the case's "tf32").
# Fused epilogues (issue 18 item 4), float16 with a bias: (row, channels last, name suffix, residual). PyTorch runs
# the chain a user writes, relu(conv2d(x, w, b) [+ r]); jitune one kernel (jitune's epilogue "y = max(acc [+ r],
# 0.0f)", templates/conv2d/conv2d.cpp).
FUSED_ROWS = [((32, 64, 56, 56, 64, 3, 1, 1), False, "_bias_relu", False),
              ((32, 64, 56, 56, 64, 3, 1, 1), False, "_bias_add_relu", True),
              ((32, 64, 56, 56, 64, 3, 1, 1), True, "_bias_add_relu", True),
              ((1, 64, 56, 56, 64, 3, 1, 1), False, "_bias_add_relu", True)]


def cases():
    return ([_case(dtype, *row) for dtype in ("float32", "float16") for row in ROWS] +
            [_case("float16", *row) for row in NETWORK_ROWS] +
            [_case("float16", *row, nhwc=True) for row in CHANNELS_LAST_ROWS] +
            [_case("float16", *row, nhwc=nhwc, fused=(suffix, residual)) for row, nhwc, suffix, residual in FUSED_ROWS] +
            [_case("float32", *row) for row in FLOAT32_ROWS] +
            [_case("float32", *row, nhwc=True) for row in FLOAT32_CHANNELS_LAST_ROWS] +
            [_case("float32", *row, tf32=True) for row in FLOAT32_ROWS] +
            [_case("float32", *row, nhwc=True, tf32=True) for row in FLOAT32_CHANNELS_LAST_ROWS])


def fused_name(dtype, row, nhwc, suffix):
    """The bench name of a FUSED_ROWS row."""
    return _name(dtype, *row, nhwc) + suffix


def _name(dtype, n, c, h, w, k, r, stride, pad, nhwc):
    return (f"conv_{dtype}_N{n}C{c}H{h}W{w}K{k}R{r}" + (f"S{stride}" if stride > 1 else "") +
            (f"P{pad}" if pad else "") + ("_nhwc" if nhwc else ""))


def _case(dtype, n, c, h, w, k, r, stride, pad, nhwc=False, fused=None, tf32=False):
    p, q = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - r) // stride + 1
    fmt = torch.channels_last if nhwc else torch.contiguous_format

    def setup():
        dt = getattr(torch, dtype)
        x = nonzero((n, c, h, w), dt).contiguous(memory_format=fmt)
        wt = nonzero((k, c, r, r), dt).contiguous(memory_format=fmt)
        tol = 1e-4 if dtype == "float32" and not tf32 else 2e-3  # TF32 keeps 10 mantissa bits, as float16
        if fused is None:
            fn, args = (lambda a, b: F.conv2d(a, b, stride=stride, padding=pad)), (x, wt)
        else:
            bias = nonzero((k,), dt)
            res = nonzero((n, k, p, q), dt).contiguous(memory_format=fmt) if fused[1] else None
            if res is None:
                fn, args = (lambda a, b, c_: torch.relu(F.conv2d(a, b, c_, stride=stride, padding=pad))), (x, wt, bias)
            else:
                fn = lambda a, b, c_, d: torch.relu(F.conv2d(a, b, c_, stride=stride, padding=pad) + d)
                args = (x, wt, bias, res)
        ref = fn(*(a.double() for a in args))
        close = lambda got: torch.allclose(got.double(), ref, rtol=tol, atol=tol * c * r * r)
        run = lambda: fn(*args)
        check = lambda: close(run())
        return run, check, (fn, args, close)

    size = 2 if dtype == "float16" else 4
    name = _name(dtype, n, c, h, w, k, r, stride, pad, nhwc) + (fused[0] if fused else "") + ("_tf32" if tf32 else "")
    extra = (k + (n * k * p * q if fused[1] else 0)) if fused else 0
    return {"case": name, "setup": setup, "tf32": tf32,
            "bytes": (n * c * h * w + k * c * r * r + n * k * p * q + extra) * size,
            "flops": 2 * n * k * p * q * c * r * r,
            "op": "relu(conv2d(x, w, b) + r)" if fused and fused[1] else
                  "relu(conv2d(x, w, b))" if fused else "torch.nn.functional.conv2d"}
