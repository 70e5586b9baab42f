"""Signatures from ShapeDtype placeholders and host arrays, against the generic C call's packing (docs/c-abi.md) and
the jitune CLI's; the cache's export / import round trip. No GPU needed."""
import glob
import json
import os
import pathlib
import shutil
import struct
import subprocess
from ctypes import c_int64

import pytest

import jitune
from jitune import _lib, _runtime
from jitune import ShapeDtype as SD

np = pytest.importorskip("numpy")

REPO = pathlib.Path(__file__).resolve().parents[2]

F32, F16, BF16, I32, I64 = 0, 1, 2, 7, 8


def bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def call_signature(family, values, text=None):
    arr = (c_int64 * len(values))(*values)
    return _lib.text_call(_lib.lib.jitune_call_signature, family.encode(), arr, len(values),
                          text.encode() if text is not None else None)


# (op, args, kwargs, family, generic call values, text, CLI arguments)
CASES = [
    ("elementwise", ("z = x * y + 1", SD((33, 7), "float16"), SD((33, 7), "float16")), {}, "elementwise",
     [F16, 231], "z = x * y + 1", ["elementwise", "--expr", "z = x * y + 1", "--dtype", "float16", "--n", "231"]),
    ("permute", (SD((4, 5, 6), "bfloat16"), (2, 0, -2)), {}, "permute", [BF16, 3, 4, 5, 6, 3, 2, 0, 1], None,
     ["permute", "--shape", "4x5x6", "--perm", "2,0,1", "--dtype", "bfloat16"]),
    ("upsample_nearest2d", (SD((2, 3, 8, 9), "float32"),), dict(scale_factor=2), "upsample_nearest2d",
     [0, F32, 0, 0, 2, 3, 8, 9, 16, 18, 1, bits(2.0), 1, bits(2.0)], None,
     ["upsample_nearest2d", "--n", "2", "--c", "3", "--in_h", "8", "--in_w", "9", "--scale_h", "2", "--scale_w", "2",
      "--dtype", "float32"]),
    ("upsample_nearest2d", (SD((2, 5, 6, 3), "float16"),), dict(size=(7, 30), mode="nearest-exact", layout="nhwc"),
     "upsample_nearest2d", [0, F16, 1, 1, 2, 3, 5, 6, 7, 30, 0, 0, 0, 0], None,
     ["upsample_nearest2d", "--n", "2", "--c", "3", "--in_h", "5", "--in_w", "6", "--out_h", "7", "--out_w", "30",
      "--layout", "nhwc", "--mode", "nearest-exact", "--dtype", "float16"]),
    ("upsample_nearest2d_backward", (SD((2, 3, 12, 13), "bfloat16"), (2, 3, 8, 9)), dict(scale_factor=1.5),
     "upsample_nearest2d", [1, BF16, 0, 0, 2, 3, 8, 9, 12, 13, 1, bits(1.5), 1, bits(1.5)], None,
     ["upsample_nearest2d", "--direction", "backward", "--n", "2", "--c", "3", "--in_h", "8", "--in_w", "9",
      "--scale_h", "1.5", "--scale_w", "1.5", "--dtype", "bfloat16"]),
    ("index_add", (SD((100, 8), "float16"), SD((37,), "int32"), SD((37, 8), "float16")), {}, "scatter_add",
     [0, F16, I32, 100, 37, 37, 8], None,
     ["scatter_add", "--op", "index_add", "--dtype", "float16", "--index", "int32", "--rows", "100", "--count", "37",
      "--row_length", "8"]),
    ("scatter_add", (SD((100,), "bfloat16"), SD((37,), "int64"), SD((37,), "bfloat16")), {}, "scatter_add",
     [1, BF16, I64, 100, 37, 37], None,
     ["scatter_add", "--op", "index_add", "--dtype", "bfloat16", "--index", "int64", "--rows", "100", "--count", "37",
      "--row_length", "1"]),
    ("dot", (SD((1000,), "float32"), SD((1000,), "float32")), {}, "scatter_add", [2, F32, 1000], None,
     ["scatter_add", "--op", "dot", "--dtype", "float32", "--n", "1000"]),
    ("conv2d", (SD((2, 3, 16, 16), "float16"), SD((8, 3, 3, 3), "float16"), SD((8,), "float16")),
     dict(stride=2, padding=1, dilation=(1, 2)), "conv2d",
     [F16, 2, 3, 16, 16, 8, 3, 3, 3, 2, 2, 1, 1, 1, 2, 1, 0, 0], None,
     ["conv2d", "--dtype", "float16", "--n", "2", "--c", "3", "--h", "16", "--w", "16", "--k", "8", "--r", "3",
      "--s", "3", "--stride", "2", "--padding", "1", "--dilation_h", "1", "--dilation_w", "2", "--bias", "1"]),
    # The TF32 opt-in is a value of the call (after the layout) and an option of the CLI.
    ("conv2d", (SD((2, 16, 9, 9), "float32"), SD((8, 16, 3, 3), "float32")), dict(padding=1, precision="tf32"),
     "conv2d", [F32, 2, 16, 9, 9, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 1], None,
     ["conv2d", "--dtype", "float32", "--n", "2", "--c", "16", "--h", "9", "--w", "9", "--k", "8", "--r", "3",
      "--padding", "1", "--precision", "tf32"]),
    ("reduce_rows", (SD((7, 4097), "float32"), "max"), {}, "reduce_rows", [F32, 1, 7, 4097], None,
     ["reduce_rows", "--rows", "7", "--cols", "4097", "--op", "max", "--dtype", "float32"]),
    ("sum_rows", (SD((3, 5, 33), "bfloat16"),), {}, "reduce_rows", [BF16, 0, 15, 33], None,
     ["reduce_rows", "--rows", "15", "--cols", "33", "--op", "sum", "--dtype", "bfloat16"]),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_signature_equals_the_generic_calls(case):
    op, args, kwargs, family, values, text, _ = case
    sig = jitune.signature(op, *args, **kwargs)
    assert sig == call_signature(family, values, text)
    assert jitune.family(op) == family
    assert jitune.signature(getattr(jitune, op), *args, **kwargs) == sig


def _cli():
    path = os.environ.get("JITUNE_CLI") or str(REPO / "build" / "jitune")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


@pytest.mark.skipif(_cli() is None, reason="needs the jitune CLI (build/jitune, or set JITUNE_CLI)")
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_signature_equals_the_clis(case, tmp_path):
    op, args, kwargs, _, _, _, cli_args = case
    # The compile-only dry run (no GPU) prints the problem's signature.
    run = subprocess.run([_cli(), "--json", "--cache", str(tmp_path / "c.sqlite"), "tune", "--dry-run", "--strategy",
                          "random", "--budget", "1", "--threads", "1", *cli_args],
                         check=True, capture_output=True, text=True)
    assert jitune.signature(op, *args, **kwargs) == json.loads(run.stdout)[0]["signature"]


def test_signatures_from_host_arrays_and_placeholders_agree():
    x = np.zeros((4, 6), np.float16)
    assert jitune.signature("permute", x, (1, 0)) == jitune.signature("permute", SD((4, 6), np.float16), (1, 0))
    assert jitune.signature("dot", x, x) == jitune.signature("dot", SD((24,), "half"), SD((24,), "half"))


def test_signature_errors_name_the_problem():
    with pytest.raises(jitune.InvalidArgumentError, match="size= or scale_factor="):
        jitune.signature("upsample_nearest2d", SD((1, 1, 4, 4), "float32"))
    with pytest.raises(jitune.InvalidArgumentError, match="4-d"):
        jitune.signature("upsample_nearest2d", SD((4, 4), "float32"), scale_factor=2)
    with pytest.raises(jitune.InvalidArgumentError, match="mode must be"):
        jitune.signature("upsample_nearest2d", SD((1, 1, 4, 4), "float32"), scale_factor=2, mode="bilinear")
    with pytest.raises(jitune.InvalidArgumentError, match="op must be"):
        jitune.signature("reduce_rows", SD((4, 4), "float32"), "mean")
    # The C library's own checks come through with its message (the filter is larger than the input).
    with pytest.raises(jitune.InvalidArgumentError, match="conv2d"):
        jitune.signature("conv2d", SD((1, 3, 2, 2), "float32"), SD((4, 3, 5, 5), "float32"))
    with pytest.raises(jitune.InvalidArgumentError, match="precision 'fp16'; it is 'ieee'"):
        jitune.signature("conv2d", SD((1, 3, 8, 8), "float32"), SD((4, 3, 3, 3), "float32"), precision="fp16")
    # float16 is exact on tensor cores either way: the opt-in leaves its signature as it is.
    x16, w16 = SD((1, 8, 8, 8), "float16"), SD((4, 8, 3, 3), "float16")
    assert jitune.signature("conv2d", x16, w16, precision="tf32") == jitune.signature("conv2d", x16, w16)
    with pytest.raises(jitune.InvalidArgumentError, match=r"grad_output is 12 x 13 but size / scale_factor give"):
        jitune.signature("upsample_nearest2d_backward", SD((2, 3, 12, 13), "float32"), (2, 3, 8, 9), scale_factor=2)


# --- Cache export / import


def _a_shipped_cache():
    found = _runtime.shipped_caches() or sorted(glob.glob(str(REPO / "build" / "shipped" / "*.sqlite")))
    if not found:
        pytest.skip("no shipped cache here (install the wheel or build build/)")
    return found[0]


def _records(path):
    return sorted(json.dumps(json.loads(line), sort_keys=True) for line in open(path) if line.strip())


@pytest.fixture
def private_cache(tmp_path):
    """Points the default cache of export_cache / import_cache at a fresh file for one test."""
    saved = _runtime._settings
    _runtime._settings = _runtime.Settings(cache_dir=str(tmp_path / "user"))
    yield tmp_path / "user" / "tuning.sqlite"
    _runtime._settings = saved


def test_export_import_round_trip(tmp_path, private_cache):
    shipped = tmp_path / "shipped.sqlite"
    shutil.copy(_a_shipped_cache(), shipped)
    first = tmp_path / "first.jsonl"
    n = jitune.export_cache(first, cache=shipped)
    assert n > 0 and len(_records(first)) == n

    report = jitune.import_cache(first, cache=tmp_path / "copy.sqlite")
    assert report == jitune.ImportReport(added=n, replaced=0, kept=0, rejected=0)
    second = tmp_path / "second.jsonl"
    assert jitune.export_cache(second, cache=tmp_path / "copy.sqlite") == n
    assert _records(second) == _records(first)
    again = jitune.import_cache(first, cache=tmp_path / "copy.sqlite")
    assert again.added == 0 and again.replaced == 0 and again.kept == n

    # Without cache=: the configured user cache.
    os.makedirs(private_cache.parent)
    assert jitune.import_cache(first).added == n
    assert private_cache.is_file()
    assert jitune.export_cache(tmp_path / "third.jsonl") == n


def test_rejected_lines_still_import_the_valid_ones(tmp_path):
    shipped = tmp_path / "shipped.sqlite"
    shutil.copy(_a_shipped_cache(), shipped)
    lines = tmp_path / "lines.jsonl"
    n = jitune.export_cache(lines, cache=shipped)
    with open(lines, "a") as f:
        f.write('{"family": "no_such_family"}\n')
    with pytest.raises(jitune.InvalidArgumentError) as info:
        jitune.import_cache(lines, cache=tmp_path / "db.sqlite")
    assert info.value.report.added == n and info.value.report.rejected == 1
    assert "line" in str(info.value)


def test_export_of_a_missing_cache_is_an_error(tmp_path):
    with pytest.raises(jitune.JituneError):
        jitune.export_cache(tmp_path / "out.jsonl", cache=tmp_path / "missing" / "none.sqlite")
