"""The jitune package without a GPU: loading, version, every C prototype and struct mirror against the header,
the status -> exception mapping, the C ABI's errors (no device, bad arguments), runtimes and configure()."""
import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import jitune
from jitune import _lib, _runtime, errors
from conftest import HAS_GPU

REPO = pathlib.Path(__file__).resolve().parents[2]
HEADER = REPO / "include" / "jitune" / "jitune.h"

needs_no_gpu = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a CUDA device")


def test_version_is_the_projects():
    assert re.fullmatch(r"\d+\.\d+\.\d+", jitune.__version__)
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert f"project(jitune VERSION {jitune.__version__}" in cmake
    try:
        from importlib.metadata import version

        assert version("jitune") == jitune.__version__
    except Exception:  # noqa: BLE001 -- not installed as a distribution (JITUNE_LIBRARY runs)
        pass


def test_the_library_and_nvrtc_were_found():
    assert os.path.isfile(_lib.library_path)
    assert _lib.nvrtc_path
    # libjitune exports the C ABI only.
    assert isinstance(_lib.lib.jitune_version, ctypes._CFuncPtr)


def _header_functions():
    """{name: parameter count} of every JITUNE_API function in jitune.h."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    out = {}
    for m in re.finditer(r"JITUNE_API\s+[^;(]*?\b(jitune_\w+)\s*\(([^)]*)\)\s*;", text, flags=re.S):
        params = m.group(2).strip()
        out[m.group(1)] = 0 if params in ("", "void") else params.count(",") + 1
    return out


@pytest.mark.skipif(not HEADER.is_file(), reason="needs the source tree's include/jitune/jitune.h")
def test_every_function_of_the_header_has_a_prototype():
    functions = _header_functions()
    assert len(functions) >= 33
    assert set(functions) == set(_lib._PROTOTYPES)
    for name, n_params in functions.items():
        fn = getattr(_lib.lib, name)
        assert fn.argtypes is not None and len(fn.argtypes) == n_params, name
        assert fn.restype is not None, name


STRUCTS = {
    "jitune_runtime_options": _lib.RuntimeOptions,
    "jitune_device_info": _lib.DeviceInfo,
    "jitune_upsample_nearest2d_shape": _lib.UpsampleNearest2dShape,
    "jitune_conv2d_params": _lib.Conv2dParams,
    "jitune_tune_result": _lib.TuneResult,
    "jitune_import_report": _lib.ImportReport,
}


@pytest.mark.skipif(not HEADER.is_file() or not shutil.which("cc"), reason="needs jitune.h and a C compiler")
def test_struct_mirrors_match_the_c_layout(tmp_path):
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "jitune/jitune.h"', "int main(void) {"]
    for cname, cls in STRUCTS.items():
        lines.append(f'  printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        for field, _ in cls._fields_:
            lines.append(f'  printf("{cname} {field} %zu\\n", offsetof({cname}, {field}));')
    lines += ["  return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c99", f"-I{REPO / 'include'}", str(src), "-o", str(exe)], check=True)
    c = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        struct, field, value = line.split()
        c[(struct, field)] = int(value)
    for cname, cls in STRUCTS.items():
        assert ctypes.sizeof(cls) == c[(cname, "sizeof")], cname
        for field, _ in cls._fields_:
            assert getattr(cls, field).offset == c[(cname, field)], (cname, field)


def test_make_sets_struct_size_and_zeroes():
    o = _lib.RuntimeOptions.make(device=3)
    assert o.struct_size == ctypes.sizeof(_lib.RuntimeOptions)
    assert o.device == 3 and o.user_cache is None and o.tune_budget == 0


def test_status_names_and_exception_classes():
    expected = {
        1: errors.InvalidArgumentError,
        2: errors.NoDeviceError,
        3: errors.CudaError,
        4: errors.CompileError,
        5: errors.StoreError,
        6: errors.JituneError,
        7: errors.OutOfMemoryError,
        8: errors.BufferTooSmallError,
        9: errors.JituneError,
        42: errors.JituneError,
    }
    for status, cls in expected.items():
        assert errors.error_class(status) is cls
        e = errors.error_for(status, "what happened")
        assert type(e) is cls and e.status == status and str(e) == "what happened"
        assert isinstance(e, RuntimeError)
    for status in range(10):
        assert _lib.status_name(status) == errors.STATUS_NAMES[status]
    assert _lib.status_name(99) == "JITUNE_UNKNOWN_STATUS"
    assert issubclass(errors.InvalidArgumentError, ValueError)
    assert issubclass(errors.OutOfMemoryError, MemoryError)
    assert errors.error_for(3, "").args[0] == "JITUNE_ERROR_CUDA"
    assert errors.NoDeviceError("x").status == 2 and errors.NoDeviceError("x").status_name == "JITUNE_ERROR_NO_DEVICE"
    for name in ("JituneError", "InvalidArgumentError", "NoDeviceError", "CudaError", "CompileError", "StoreError",
                 "OutOfMemoryError"):
        assert getattr(jitune, name) is getattr(errors, name)


def test_check_raises_the_c_message():
    _lib.check(0)
    shape = (ctypes.c_int64 * 2)(4, 5)
    perm = (ctypes.c_int32 * 2)(0, 0)
    status = _lib.lib.jitune_permute_signature(shape, perm, 2, 0, None, 0, None)
    assert status == errors.ERROR_INVALID_ARGUMENT
    with pytest.raises(jitune.InvalidArgumentError, match="perm") as info:
        _lib.check(status)
    assert info.value.status == errors.ERROR_INVALID_ARGUMENT
    # A NULL argument is named by the C layer.
    with pytest.raises(jitune.InvalidArgumentError, match="jitune_permute_signature: argument 'shape' is NULL"):
        _lib.text_call(_lib.lib.jitune_permute_signature, None, perm, 2, 0)


def test_text_call_retries_with_the_size_asked_for():
    long_expr = "y = x" + " + x" * 300  # a signature longer than the first 512-byte buffer
    sig = _lib.text_call(_lib.lib.jitune_elementwise_signature, long_expr.encode(), 10, 0)
    assert len(sig) > 512 and sig.endswith(";n=10") and "expr=" + long_expr in sig


@needs_no_gpu
def test_no_device_without_a_gpu():
    assert jitune.device_count() == 0
    assert jitune.devices() == []
    with pytest.raises(jitune.NoDeviceError) as info:
        _runtime.runtime_for(0)
    assert info.value.status == errors.ERROR_NO_DEVICE
    assert "libcuda.so.1" in str(info.value) or "cuInit" in str(info.value) or "device" in str(info.value)
    with pytest.raises(jitune.NoDeviceError):
        jitune.warnings()
    assert not _runtime._handles


@needs_no_gpu
def test_explain_and_tune_need_a_device():
    x = jitune.ShapeDtype((64, 32), "float16")
    with pytest.raises(jitune.NoDeviceError):
        jitune.explain("permute", x, (1, 0))
    with pytest.raises(jitune.NoDeviceError):
        jitune.explain("permute", signature="dtype=float16;perm=1,0;shape=64x32")
    with pytest.raises(jitune.NoDeviceError):
        jitune.tune("sum_rows", x, budget=2)
    with pytest.raises(jitune.NoDeviceError):
        jitune.tune([("sum_rows", (x,)), ("permute", (x, (1, 0)), {})], budget=2)


def test_tune_list_items_are_checked():
    with pytest.raises(jitune.InvalidArgumentError, match="each problem"):
        jitune.tune(["permute"])
    with pytest.raises(jitune.InvalidArgumentError, match="unknown op"):
        jitune.signature("transpose", jitune.ShapeDtype((2, 2), "float32"), (1, 0))
    with pytest.raises(jitune.InvalidArgumentError, match="not both"):
        jitune.explain("permute", jitune.ShapeDtype((2, 2), "float32"), signature="dtype=float32;perm=1,0;shape=2x2")


@pytest.fixture
def fresh_settings():
    """Settings as before any runtime existed (on a GPU, earlier tests made some); restored afterwards."""
    saved, handles = _runtime.settings(), dict(_runtime._handles)
    _runtime._handles.clear()
    yield
    _runtime._handles.clear()
    _runtime._handles.update(handles)
    _runtime._settings = saved


def test_configure_before_and_after_the_first_runtime(fresh_settings, tmp_path):
    jitune.configure(cache_dir=tmp_path, tune_on_first_use=True, tune_budget=8, quiet=True,
                     extra_shipped_caches=[tmp_path / "extra.sqlite"])
    s = jitune.settings()
    assert s.user_cache == os.path.join(str(tmp_path), "tuning.sqlite")
    assert s.tune_on_first_use and s.tune_budget == 8 and s.quiet
    assert s.extra_shipped_caches == (str(tmp_path / "extra.sqlite"),)
    # Once a runtime exists (a stand-in handle here: no runtime is made without a GPU), other options are refused
    # and the same ones accepted.
    _runtime._handles[99] = 1
    try:
        jitune.configure(cache_dir=tmp_path, tune_on_first_use=True, tune_budget=8, quiet=True,
                         extra_shipped_caches=[tmp_path / "extra.sqlite"])
        with pytest.raises(jitune.JituneError, match="before the first op"):
            jitune.configure(cache_dir=tmp_path / "other")
    finally:
        del _runtime._handles[99]


def test_the_wheel_ships_its_caches():
    caches = _runtime.shipped_caches()
    if not os.path.isdir(os.path.join(os.path.dirname(jitune.__file__), "shipped")):
        pytest.skip("the package was not installed from a wheel (no jitune/shipped/)")
    assert caches and all(c.endswith(".sqlite") for c in caches)
    # and the kernels of its cases, compiled at build time beside them (a first call loads instead of compiling)
    kernels = pathlib.Path(caches[0]).parent / "kernels"
    assert kernels.is_dir(), "the wheel has no shipped/kernels/ (built with -DJITUNE_SHIP_KERNELS=OFF?)"
    assert len([p for p in kernels.iterdir() if p.is_file()]) > 50


def test_fast_calls_are_bound_to_the_loaded_library():
    """jitune._fast (the stable-ABI extension for hot calls) is in the wheel and bound; a call reaches the very
    library ctypes loaded: a NULL runtime gets the C layer's status and thread-local message."""
    package = pathlib.Path(jitune.__file__).parent
    if not list(package.glob("_fast*.so")):
        pytest.skip("this build of the package has no jitune._fast (no Python headers): ctypes only")
    fast = _lib.fast
    assert fast is not None
    status = fast.elementwise(None, b"z = x * y", 0x1000, 16, 0, None, 0x2000, 0x3000)
    assert status == errors.ERROR_INVALID_ARGUMENT
    assert "jitune_elementwise: argument 'runtime' is NULL" in _lib.last_error()
    status = fast.permute(None, 0x1000, 0x2000, (4, 5), (1, 0), 0, None)
    assert status == errors.ERROR_INVALID_ARGUMENT and "jitune_permute" in _lib.last_error()
    for call, args in ((fast.index_add, (None, 1, 4, 2, 3, 7, 3, 3, 1, 0, 1.0, 0, None)),
                       (fast.scatter_add, (None, 1, 4, 2, 3, 7, 3, 3, 0, 1.0, 0, None)),
                       (fast.dot, (None, 1, 2, 3, 4, 0, None)),
                       (fast.reduce_rows, (None, 1, 2, 3, 4, 0, 0, None)),
                       (fast.upsample_nearest2d, (None, 1, 2, 3, None, 0)),
                       (fast.upsample_nearest2d, (None, 1, 2, 3, None, 1))):
        assert call(*args) == errors.ERROR_INVALID_ARGUMENT
        assert "argument 'runtime' is NULL" in _lib.last_error()


def test_fast_rejects_bad_arguments_without_calling():
    fast = _lib.fast
    if fast is None:
        pytest.skip("no jitune._fast in this build")
    with pytest.raises(TypeError, match="takes 6 arguments and 1 to 8 inputs"):
        fast.elementwise(None, b"z = x", 0, 1, 0, None)  # no input
    with pytest.raises(TypeError, match="takes 6 arguments and 1 to 8 inputs"):
        fast.elementwise(None, b"z = x", 0, 1, 0, None, *range(1, 10))  # 9 inputs
    with pytest.raises(TypeError):
        fast.elementwise(None, "not bytes", 0, 1, 0, None, 1)
    with pytest.raises(TypeError):
        fast.dot(None, "x", 2, 3, 4, 0, None)
    with pytest.raises(OverflowError):
        fast.dot(None, 1, 2, 2 ** 70, 4, 0, None)
    with pytest.raises(OverflowError):
        fast.dot(None, 1, 2, 3, 4, 2 ** 40, None)
    with pytest.raises(ValueError, match="at most 8"):
        fast.permute(None, 1, 2, tuple(range(9)), tuple(range(9)), 0, None)
    with pytest.raises(ValueError, match="differ in length"):
        fast.permute(None, 1, 2, (4, 5), (0,), 0, None)
    with pytest.raises(TypeError, match="tuple"):
        fast.permute(None, 1, 2, [4, 5], (1, 0), 0, None)
    with pytest.raises(TypeError, match="takes 13 arguments"):
        fast.index_add(None)


def test_ctypes_only_when_asked(tmp_path):
    code = "from jitune import _lib; print(_lib.fast is None)"
    env = dict(os.environ, JITUNE_PYTHON_CTYPES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
