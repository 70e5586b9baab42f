"""upsample_nearest2d peers: F.interpolate(mode="nearest") forward and aten.upsample_nearest2d_backward, NCHW (the
12 public rows of bench-cases.md) and channels_last twins.

Run as `cd bench && python3 -m peer.upsample_nearest2d --check FILE` it compares jitune's results written by
`gpu_upsample_nearest2d_test` (JITUNE_UPSAMPLE_TORCH_DUMP=FILE) with PyTorch's on the same GPU: forward bit for bit,
backward within float32 rounding (and counts the bit-identical ones).
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

from .common import nonzero

SHAPES = ((16, 32, 80, 80), (2, 640, 64, 64), (8, 256, 128, 128))
# Forward cases with a misaligned input (issue 19): dtype, shape, layout, element offset of the input's start.
SHIFTED = (("float16", (8, 256, 128, 128), "nchw", 1), ("float16", (8, 256, 128, 128), "nhwc", 1),
           ("float32", (8, 256, 128, 128), "nchw", 1), ("float16", (2, 640, 64, 64), "nchw", 3))


def cases():
    out = []
    for layout in ("nchw", "nhwc"):
        for dtype in ("float32", "float16"):
            for shape in SHAPES:
                for direction in ("fwd", "bwd"):
                    dims = "x".join(str(d) for d in shape)
                    suffix = "_nhwc" if layout == "nhwc" else ""
                    out.append(_case(f"upsample2x_{direction}_{dtype}_{dims}{suffix}", direction, dtype, shape, layout))
    # Beyond the public rows: general scales (jitune's gather kernels).
    for direction in ("fwd", "bwd"):
        out.append(_case(f"upsample3x_{direction}_float32_8x128x64x64", direction, "float32", (8, 128, 64, 64),
                         "nchw", 3.0))
        out.append(_case(f"upsample1p5x_{direction}_float16_8x128x96x96_nhwc", direction, "float16",
                         (8, 128, 96, 96), "nhwc", 1.5))
    # Misaligned inputs: views `offset` elements into a larger tensor (as bench/cases_upsample_nearest2d.cpp).
    for dtype, shape, layout, offset in SHIFTED:
        dims = "x".join(str(d) for d in shape)
        suffix = "_nhwc" if layout == "nhwc" else ""
        out.append(_case(f"upsample2x_fwd_{dtype}_{dims}{suffix}_src+{offset}", "fwd", dtype, shape, layout,
                         offset=offset))
    return out


def shifted(shape, dt, layout, offset):
    """A random NCHW tensor (NHWC-strided for "nhwc") starting `offset` elements into its storage."""
    n, c, h, w = shape
    flat = nonzero(n * c * h * w + offset, dt)[offset:]
    return flat.view(n, h, w, c).permute(0, 3, 1, 2) if layout == "nhwc" else flat.view(n, c, h, w)


def _case(name, direction, dtype, shape, layout, factor=2.0, offset=0):
    n, c, h, w = shape
    oh, ow = int(h * factor), int(w * factor)
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format

    def setup():
        dt = getattr(torch, dtype)
        if direction == "fwd":
            x = shifted(shape, dt, layout, offset) if offset else nonzero(shape, dt).contiguous(memory_format=fmt)
            run = lambda: F.interpolate(x, scale_factor=factor, mode="nearest")
            if factor == 2.0:
                same = lambda got: torch.equal(got, x.repeat_interleave(2, 2).repeat_interleave(2, 3))
            else:
                same = lambda got: torch.equal(got, F.interpolate(x.float(), scale_factor=factor).to(dt))
            check = lambda: same(run())
            pure = (lambda t: F.interpolate(t, scale_factor=factor, mode="nearest"), (x,), same)
        else:
            g = nonzero((n, c, oh, ow), dt).contiguous(memory_format=fmt)
            run = lambda: torch.ops.aten.upsample_nearest2d_backward(g, [oh, ow], [n, c, h, w], factor, factor)
            if factor == 2.0:
                expected = lambda: g.float().view(n, c, h, 2, w, 2).sum((3, 5))
            else:
                expected = lambda: torch.ops.aten.upsample_nearest2d_backward(g.float(), [oh, ow], [n, c, h, w],
                                                                              factor, factor)
            close = lambda got: torch.allclose(got.float(), expected(), rtol=1e-2 if dt != torch.float32 else 1e-6,
                                               atol=1e-5)
            check = lambda: close(run())
            pure = (lambda t: torch.ops.aten.upsample_nearest2d_backward(t, [oh, ow], [n, c, h, w], factor, factor),
                    (g,), close)
        return run, check, pure

    size = 2 if dtype == "float16" else 4
    return {"case": name, "setup": setup, "bytes": n * c * (h * w + oh * ow) * size,
            "op": "F.interpolate" if direction == "fwd" else "aten.upsample_nearest2d_backward"}


def _tensor(blob, offset, shape, dtype, layout):
    n, c, h, w = shape
    count = n * c * h * w
    dt = getattr(torch, dtype)
    t = torch.frombuffer(blob, dtype=dt, count=count, offset=offset).clone().cuda()
    return t.view(n, h, w, c).permute(0, 3, 1, 2) if layout == "nhwc" else t.view(n, c, h, w)


def _bits(t, layout):
    t = t.permute(0, 2, 3, 1) if layout == "nhwc" else t
    t = t.contiguous().reshape(-1)
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def check(path):
    """Compares every dumped case with PyTorch; returns the number of failures."""
    blob = bytearray(open(path + ".bin", "rb").read())
    total = fwd_bad = bwd_bad = bwd_bitwise = shape_bad = 0
    failures = []
    for line in open(path + ".jsonl"):
        r = json.loads(line)
        total += 1
        in_shape = (r["n"], r["c"], r["in_h"], r["in_w"])
        out_shape = (r["n"], r["c"], r["out_h"], r["out_w"])
        x = _tensor(blob, r["x"], in_shape, r["dtype"], r["layout"])
        g = _tensor(blob, r["g"], out_shape, r["dtype"], r["layout"])
        ours_y = _tensor(blob, r["y"], out_shape, r["dtype"], r["layout"])
        ours_gi = _tensor(blob, r["gi"], in_shape, r["dtype"], r["layout"])
        sh, sw, mode = r["scale_h"], r["scale_w"], r["mode"]
        if r["how"] == "scale":
            y = F.interpolate(x, scale_factor=(sh, sw), mode=mode)
        elif r["how"] == "size":
            y = F.interpolate(x, size=(r["out_h"], r["out_w"]), mode=mode)
        else:
            fwd_op = (torch.ops.aten.upsample_nearest2d if mode == "nearest"
                      else torch.ops.aten._upsample_nearest_exact2d)
            y = fwd_op(x, [r["out_h"], r["out_w"]], sh, sw)
        bwd_op = (torch.ops.aten.upsample_nearest2d_backward if mode == "nearest"
                  else torch.ops.aten._upsample_nearest_exact2d_backward)
        gi = bwd_op(g, [r["out_h"], r["out_w"]], list(in_shape), sh, sw)
        torch.cuda.synchronize()
        what = f"{r['how']} {r['dtype']} {r['layout']} {mode} {in_shape} -> {out_shape[2:]} scales ({sh}, {sw})"
        if tuple(y.shape) != out_shape:
            shape_bad += 1
            failures.append(f"output shape {tuple(y.shape)} != ours {out_shape}: {what}")
            continue
        if not torch.equal(_bits(y, r["layout"]), _bits(ours_y, r["layout"])):
            fwd_bad += 1
            diff = (_bits(y, r["layout"]) != _bits(ours_y, r["layout"])).sum().item()
            failures.append(f"forward differs in {diff} elements: {what}")
        if torch.equal(_bits(gi, r["layout"]), _bits(ours_gi, r["layout"])):
            bwd_bitwise += 1
        else:
            # Within float32 rounding: both sum in float and round once to the element type.
            ref, got = gi.double(), ours_gi.double()
            ulp = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[r["dtype"]]
            window = max(1.0, (r["out_h"] / r["in_h"] + 1) * (r["out_w"] / r["in_w"] + 1))
            tol = ulp * ref.abs() + window * 4 * 2.0 ** -24
            if not bool(((ref - got).abs() <= tol).all()):
                bwd_bad += 1
                diff = ((ref - got).abs() > tol).sum().item()
                worst = (ref - got).abs().max().item()
                failures.append(f"backward differs in {diff} elements (max {worst:.3g}): {what}")
    for f in failures[:40]:
        print("MISMATCH", f)
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name(0)}: {total} random calls; forward "
          f"bit-identical {total - fwd_bad - shape_bad}/{total} (output size mismatches {shape_bad}); backward within "
          f"float32 rounding {total - bwd_bad - shape_bad}/{total}, bit-identical {bwd_bitwise}/{total}")
    return fwd_bad + bwd_bad + shape_bad


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", required=True, help="dump written by gpu_upsample_nearest2d_test (without suffix)")
    args = ap.parse_args()
    sys.exit(1 if check(args.check) else 0)


if __name__ == "__main__":
    main()
