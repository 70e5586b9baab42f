"""elementwise_view peers (issue 21): the fused chains as a PyTorch user writes them, eager (one to three
kernels) and, for Inductor, the same expression compiled. Case names and bytes match bench/cases_elementwise_view.cpp
(the bytes the fused kernel must move: the output once, each input's distinct elements once)."""
import torch

from .common import nonzero


def cases():
    return [
        _case("view_permute_scale_bias_float16_64x1024x1024", "float16",
              lambda: (nonzero((64, 1024, 1024), torch.float16), nonzero((), torch.float16),
                       nonzero((1024,), torch.float16)),
              lambda x, s, b: x.permute(0, 2, 1) * s + b, 2 * (2 * 64 * 1024 * 1024 + 1 + 1024),
              "x.permute(0, 2, 1) * s + b"),
        # The same chain into a contiguous result: PyTorch keeps x's memory order above, so this one transposes.
        _case("view_permute_scale_bias_contiguous_float16_64x1024x1024", "float16",
              lambda: (nonzero((64, 1024, 1024), torch.float16), nonzero((), torch.float16),
                       nonzero((1024,), torch.float16)),
              lambda x, s, b: (x.permute(0, 2, 1) * s + b).contiguous(), 2 * (2 * 64 * 1024 * 1024 + 1 + 1024),
              "(x.permute(0, 2, 1) * s + b).contiguous()"),
        _case("view_bias_add_float16_8192x1024", "float16",
              lambda: (nonzero((8192, 1024), torch.float16), nonzero((1024,), torch.float16)),
              lambda x, b: x + b, 2 * (2 * 8192 * 1024 + 1024), "x + b"),
        _case("view_slice_mul_float32_8192x1024", "float32",
              lambda: (nonzero((8192, 1025), torch.float32), nonzero((8192, 1024), torch.float32)),
              lambda a, b: a[:, 1:] * b, 4 * 3 * 8192 * 1024, "a[:, 1:] * b"),
        _case("view_broadcast3_float16_4096x4096", "float16",
              lambda: (nonzero((4096, 4096), torch.float16), nonzero((4096,), torch.float16),
                       nonzero((4096, 1), torch.float16)),
              lambda x, r, c: x * r + c, 2 * (2 * 4096 * 4096 + 2 * 4096), "x * r + c"),
    ]


def _case(name, dtype, make, fn, nbytes, op):
    def setup():
        args = make()
        want = fn(*(a.double() for a in args)).to(getattr(torch, dtype)).float()
        res = [None]

        def run():
            res[0] = fn(*args)

        # One rounding of a short float expression: a few units of the dtype.
        tol = 1e-5 if dtype == "float32" else 4e-3
        good = lambda got: torch.allclose(got.float(), want, rtol=tol, atol=tol)
        return run, lambda: good(res[0]), (fn, args, good)

    return {"case": name, "setup": setup, "bytes": nbytes, "op": op}
