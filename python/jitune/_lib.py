"""Loading libjitune (the C ABI of include/jitune/jitune.h) with ctypes, its prototypes and struct mirrors.

Stable names other modules (jitune.torch included) use:

- ``lib``: the ctypes.CDLL. Every ``jitune_*`` function has ``argtypes`` and ``restype`` set, so ctypes never
  guesses: pointers are ``c_void_p`` (pass Python ints; None is NULL), sizes ``c_int64`` / ``c_size_t``, enums
  ``c_int``, texts ``c_char_p`` (pass bytes). A hot op call is one ctypes call, e.g.
  ``status = lib.jitune_permute(runtime, src_ptr, dst_ptr, shape_arr, perm_arr, ndim, dtype_code, stream)``
  followed by ``if status: check(status)``.
- ``check(status)``: raises the exception class of a non-zero status (jitune.errors) with
  ``jitune_last_error()``'s message; returns None for 0.
- ``text_call(fn, *args)``: calls a function that ends in ``(char* out, size_t out_size, size_t* required)``
  and returns its text (str), retrying once with the size the library asked for.
- ``last_error()``, ``version()``, ``status_name(status)``.
- Struct mirrors (each with ``make()``, which zeroes it and sets ``struct_size``): ``RuntimeOptions``,
  ``DeviceInfo``, ``UpsampleNearest2dShape``, ``Conv2dParams``, ``TuneResult``, ``ImportReport``.
- ``library_path``, ``nvrtc_path``: where libjitune and libnvrtc were loaded from.
- ``fast``: the jitune._fast module (elementwise, permute, index_add, scatter_add, dot, reduce_rows: the C ABI's
  arguments in order, pointers as ints, returning the status; upsample_nearest2d(rt, shape_address, in, out,
  stream, backward)) bound to ``lib``, or None (no extension in this
  build, or $JITUNE_PYTHON_CTYPES=1); jitune.torch uses it for those calls when present.

Where the library comes from: $JITUNE_LIBRARY when set (a path), else libjitune.so in this package's folder (the
wheel puts it there). libjitune needs libnvrtc.so.13; when the plain name does not load, it is preloaded
(RTLD_GLOBAL, with its libnvrtc-builtins) from $CUDA_HOME / $CUDA_PATH, /usr/local/cuda/lib64,
/usr/local/cuda/targets/x86_64-linux/lib, or NVIDIA's pip packages (site-packages/nvidia/cu13/lib,
nvidia/cuda_nvrtc/lib). libcuda.so.1 is opened by the library itself when a runtime is created, so importing
jitune works on a machine without a driver.

Environment set up here, only where unset: JITUNE_WORKER (the package's jitune-worker, so tuning measures
candidates in a separate process) and JITUNE_CUDA_INCLUDE (the CUDA headers of NVIDIA's pip packages, when no
toolkit's include folder has cuda_fp16.h). When NVRTC had to be preloaded from a toolkit folder the loader does not
search, that folder is added to LD_LIBRARY_PATH for child processes (jitune-worker).
"""

from __future__ import annotations

import ctypes
import glob
import os
import site
import sys
from ctypes import (
    POINTER,
    Structure,
    byref,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint64,
    c_void_p,
    create_string_buffer,
)

from . import errors

__all__ = [
    "lib",
    "fast",
    "check",
    "text_call",
    "last_error",
    "version",
    "status_name",
    "RuntimeOptions",
    "DeviceInfo",
    "UpsampleNearest2dShape",
    "Conv2dParams",
    "TuneResult",
    "ImportReport",
    "library_path",
    "nvrtc_path",
]

_HERE = os.path.dirname(os.path.abspath(__file__))
_NVRTC_SONAME = "libnvrtc.so.13"


# --- Struct mirrors (jitune.h). Field order and types follow the header exactly; tests/python compare them
# --- with a C compiler's sizeof / offsetof.


class _Sized(Structure):
    """A jitune struct: ``make()`` returns a zeroed instance with struct_size set, as the C ABI asks."""

    @classmethod
    def make(cls, **fields):
        s = cls()
        s.struct_size = ctypes.sizeof(cls)
        for k, v in fields.items():
            setattr(s, k, v)
        return s


class RuntimeOptions(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("device", c_int),
        ("user_cache", c_char_p),
        ("disable_user_cache", c_int),
        ("shipped_caches", POINTER(c_char_p)),
        ("n_shipped_caches", c_size_t),
        ("disable_builtin_shipped_caches", c_int),
        ("binary_cache_dir", c_char_p),
        ("disable_disk_binary_cache", c_int),
        ("quiet", c_int),
        ("tune_on_first_use", c_int),
        ("tune_budget", c_int64),
        ("tune_min_time_ms", c_double),
    ]


class DeviceInfo(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("ordinal", c_int),
        ("cc_major", c_int),
        ("cc_minor", c_int),
        ("sm_count", c_int),
        ("l2_bytes", c_int64),
        ("global_memory_bytes", c_int64),
        ("max_shared_per_block_optin", c_int),
        ("driver_version", c_int),
        ("name", c_char * 256),
        ("nvrtc_version", c_char * 32),
        ("sm_clock_mhz", c_int),
        ("memory_clock_mhz", c_int),
    ]


class UpsampleNearest2dShape(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("n", c_int64),
        ("c", c_int64),
        ("in_h", c_int64),
        ("in_w", c_int64),
        ("out_h", c_int64),
        ("out_w", c_int64),
        ("scale_h", c_double),
        ("scale_w", c_double),
        ("layout", c_int),
        ("mode", c_int),
        ("dtype", c_int),
    ]


class Conv2dParams(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("input", c_int64 * 4),
        ("weight", c_int64 * 4),
        ("stride", c_int64 * 2),
        ("padding", c_int64 * 2),
        ("dilation", c_int64 * 2),
        ("layout", c_int),
        ("epilogue", c_char_p),
        ("precision", c_int),
    ]


def fp32_precision_code(precision, context=""):
    """jitune_conv2d_params.precision for "ieee" (exact float32 products) or "tf32" (TF32 tensor cores allowed);
    anything else raises InvalidArgumentError, its message prefixed by `context`."""
    code = {"ieee": 0, "tf32": 1}.get(precision) if isinstance(precision, str) else None
    if code is None:
        raise errors.InvalidArgumentError(
            f"{context}precision {precision!r}; it is 'ieee' (exact float32 products, the default) or 'tf32' "
            "(float32 may run on TF32 tensor cores, inputs truncated to 10 mantissa bits)")
    return code


class TuneResult(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("best_us", c_double),
        ("default_us", c_double),
        ("candidates", c_uint64),
        ("failed", c_uint64),
        ("stored", c_int),
        ("wall_s", c_double),
        ("config", c_char * 256),
        ("heuristic_config", c_char * 256),
    ]


class ImportReport(_Sized):
    _fields_ = [
        ("struct_size", c_size_t),
        ("added", c_uint64),
        ("replaced", c_uint64),
        ("kept", c_uint64),
        ("rejected", c_uint64),
    ]


# --- Finding NVRTC and libjitune


def _site_dirs() -> list[str]:
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # some virtualenv versions
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p and p.endswith(("site-packages", "dist-packages"))]
    dirs.append(os.path.dirname(_HERE))  # the site-packages this package sits in
    seen, out = set(), []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _toolkit_dirs() -> list[str]:
    dirs = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        root = os.environ.get(var)
        if root:
            dirs += [os.path.join(root, "lib64"), os.path.join(root, "lib"),
                     os.path.join(root, "targets", "x86_64-linux", "lib")]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"]
    return dirs


def _pip_dirs(sub: str) -> list[str]:
    return [os.path.join(d, "nvidia", pkg, sub) for d in _site_dirs() for pkg in ("cu13", "cuda_nvrtc")]


def _preload_nvrtc(soname: str) -> tuple[str | None, str]:
    """Makes `soname` loadable for libjitune; returns (folder it was preloaded from or None, how it was found)."""
    try:
        ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
        return None, "the loader's search path"
    except OSError:
        pass
    for d in _toolkit_dirs() + _pip_dirs("lib"):
        path = os.path.join(d, soname)
        if not os.path.isfile(path):
            continue
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        # NVRTC opens its builtins library by name when it first compiles; loaded here, that name resolves.
        for builtins in sorted(glob.glob(os.path.join(d, "libnvrtc-builtins.so.*"))):
            try:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError:
                continue
        return d, path
    return None, ""


def _library_path() -> str:
    env = os.environ.get("JITUNE_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise ImportError(f"JITUNE_LIBRARY={env} is not a file; point it at a built libjitune.so "
                              "(build/capi/libjitune.so.0 of a C++ build) or unset it to use the installed one")
        return env
    for name in ("libjitune.so", "libjitune.so.0"):
        path = os.path.join(_HERE, name)
        if os.path.isfile(path):
            return path
    raise ImportError(f"libjitune.so is not in {_HERE}: install the package with `pip install .` (or a wheel "
                      "from scripts/build-wheel.sh), or set JITUNE_LIBRARY to a built libjitune.so")


def _load() -> tuple[ctypes.CDLL, str, str]:
    path = _library_path()
    soname = _NVRTC_SONAME
    nvrtc_dir, nvrtc_found = _preload_nvrtc(soname)
    try:
        handle = ctypes.CDLL(path)
    except OSError as e:
        text = str(e)
        # A library built against another NVRTC major names it in the error: find that one and try again.
        missing = text.split(":", 1)[0].strip()
        if missing.startswith("libnvrtc.so.") and missing != soname:
            soname = missing
            nvrtc_dir, nvrtc_found = _preload_nvrtc(soname)
            try:
                handle = ctypes.CDLL(path)
            except OSError as e2:
                text = str(e2)
                handle = None
        else:
            handle = None
        if handle is None:
            hint = ""
            if "nvrtc" in text:
                hint = (f"; {soname} (CUDA's NVRTC) was found neither on the loader's path nor under "
                        f"$CUDA_HOME, /usr/local/cuda or site-packages/nvidia: install the CUDA toolkit or "
                        f"`pip install nvidia-cuda-nvrtc`, or add its folder to LD_LIBRARY_PATH")
            elif "sqlite" in text:
                hint = "; install SQLite's shared library (Debian / Ubuntu: apt-get install libsqlite3-0)"
            raise ImportError(f"cannot load {path}: {text}{hint}") from None
    if nvrtc_dir and not any(os.path.samefile(nvrtc_dir, d) for d in _rpath_dirs(path) if os.path.isdir(d)):
        # The tuner's worker process must find the same NVRTC.
        old = os.environ.get("LD_LIBRARY_PATH", "")
        os.environ["LD_LIBRARY_PATH"] = nvrtc_dir + (":" + old if old else "")
    return handle, path, nvrtc_found


def _rpath_dirs(path: str) -> list[str]:
    """The folders the wheel's run path names (python/CMakeLists.txt), resolved for `path`."""
    origin = os.path.dirname(path)
    return [origin, os.path.join(origin, "..", "nvidia", "cu13", "lib"),
            os.path.join(origin, "..", "nvidia", "cuda_nvrtc", "lib")]


def _setup_environment(path: str) -> None:
    worker = os.path.join(os.path.dirname(path), "jitune-worker")
    if not os.environ.get("JITUNE_WORKER") and os.access(worker, os.X_OK):
        os.environ["JITUNE_WORKER"] = worker
    if not os.environ.get("JITUNE_CUDA_INCLUDE"):
        toolkit = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
        toolkit.append("/usr/local/cuda/include")
        if not any(os.path.isfile(os.path.join(d, "cuda_fp16.h")) for d in toolkit):
            for d in _pip_dirs("include") + [os.path.join(s, "nvidia", "cuda_runtime", "include")
                                             for s in _site_dirs()]:
                if os.path.isfile(os.path.join(d, "cuda_fp16.h")):
                    os.environ["JITUNE_CUDA_INCLUDE"] = d
                    break


lib, library_path, nvrtc_path = _load()
_setup_environment(library_path)


# --- Prototypes: every function of jitune.h

_rt = c_void_p  # jitune_runtime*
_ptr = c_void_p  # device pointers, stream
_enum = c_int
_text_out = (c_char_p, c_size_t, POINTER(c_size_t))  # char* out, size_t out_size, size_t* required

_PROTOTYPES = {
    "jitune_last_error": (c_char_p, ()),
    "jitune_status_name": (c_char_p, (c_int,)),
    "jitune_version": (c_char_p, ()),
    "jitune_device_count": (c_int, (POINTER(c_int),)),
    "jitune_runtime_create": (c_int, (POINTER(RuntimeOptions), POINTER(c_void_p))),
    "jitune_runtime_destroy": (c_int, (_rt,)),
    "jitune_runtime_device": (c_int, (_rt, POINTER(DeviceInfo))),
    "jitune_runtime_warnings": (c_int, (_rt, *_text_out)),
    "jitune_runtime_reload": (c_int, (_rt,)),
    "jitune_elementwise": (c_int, (_rt, c_char_p, POINTER(c_void_p), c_size_t, _ptr, c_int64, _enum, _ptr)),
    "jitune_elementwise_signature": (c_int, (c_char_p, c_int64, _enum, *_text_out)),
    "jitune_permute": (c_int, (_rt, _ptr, _ptr, POINTER(c_int64), POINTER(c_int32), c_size_t, _enum, _ptr)),
    "jitune_permute_signature": (c_int, (POINTER(c_int64), POINTER(c_int32), c_size_t, _enum, *_text_out)),
    "jitune_upsample_nearest2d": (c_int, (_rt, POINTER(UpsampleNearest2dShape), _ptr, _ptr, _ptr)),
    "jitune_upsample_nearest2d_backward": (c_int, (_rt, POINTER(UpsampleNearest2dShape), _ptr, _ptr, _ptr)),
    "jitune_upsample_nearest2d_signature": (c_int, (POINTER(UpsampleNearest2dShape), c_int, *_text_out)),
    "jitune_index_add": (c_int, (_rt, _ptr, c_int64, _ptr, c_int64, _enum, _ptr, c_int64, c_int64, _enum,
                                 c_float, c_int, _ptr)),
    "jitune_index_add_signature": (c_int, (c_int64, c_int64, c_int64, _enum, _enum, *_text_out)),
    "jitune_scatter_add": (c_int, (_rt, _ptr, c_int64, _ptr, c_int64, _enum, _ptr, c_int64, _enum, c_float, c_int,
                                   _ptr)),
    "jitune_scatter_add_signature": (c_int, (c_int64, c_int64, c_int64, _enum, _enum, *_text_out)),
    "jitune_dot": (c_int, (_rt, _ptr, _ptr, c_int64, _ptr, _enum, _ptr)),
    "jitune_dot_signature": (c_int, (c_int64, _enum, *_text_out)),
    "jitune_conv2d": (c_int, (_rt, _ptr, _ptr, _ptr, _ptr, POINTER(Conv2dParams), _enum, _ptr)),
    "jitune_conv2d_fused": (c_int, (_rt, _ptr, _ptr, _ptr, _ptr, _ptr, POINTER(Conv2dParams), _enum, _ptr)),
    "jitune_conv2d_output_shape": (c_int, (POINTER(Conv2dParams), POINTER(c_int64))),
    "jitune_conv2d_signature": (c_int, (POINTER(Conv2dParams), _enum, c_int, *_text_out)),
    "jitune_reduce_rows": (c_int, (_rt, _ptr, _ptr, c_int64, c_int64, _enum, _enum, _ptr)),
    "jitune_reduce_rows_signature": (c_int, (c_int64, c_int64, _enum, _enum, *_text_out)),
    "jitune_call": (c_int, (_rt, c_char_p, POINTER(c_int64), c_size_t, c_char_p, POINTER(c_double), c_size_t,
                            POINTER(c_void_p), c_size_t, _ptr)),
    "jitune_call_signature": (c_int, (c_char_p, POINTER(c_int64), c_size_t, c_char_p, *_text_out)),
    "jitune_explain": (c_int, (_rt, c_char_p, c_char_p, *_text_out)),
    "jitune_tune": (c_int, (_rt, c_char_p, c_char_p, c_int64, POINTER(TuneResult))),
    "jitune_cache_export": (c_int, (c_char_p, c_char_p, POINTER(c_uint64))),
    "jitune_cache_import": (c_int, (c_char_p, c_char_p, POINTER(ImportReport))),
}

for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = list(_argtypes)
del _name, _restype, _argtypes, _fn

_last_error = lib.jitune_last_error

# jitune._fast (python/fast/fast.c): the hot op calls without ctypes' argument conversion, bound to this very
# library's functions. None when the package was built without it or JITUNE_PYTHON_CTYPES=1 asks for ctypes only.
fast = None
if os.environ.get("JITUNE_PYTHON_CTYPES", "") in ("", "0"):
    try:
        from . import _fast as fast
    except ImportError:
        fast = None
    if fast is not None:
        fast.bind(*(ctypes.cast(getattr(lib, name), c_void_p).value for name in (
            "jitune_elementwise", "jitune_permute", "jitune_index_add", "jitune_scatter_add", "jitune_dot",
            "jitune_reduce_rows", "jitune_upsample_nearest2d", "jitune_upsample_nearest2d_backward")))


def last_error() -> str:
    """This thread's message of the last failed jitune call ("" after a success)."""
    return (_last_error() or b"").decode("utf-8", "replace")


def status_name(status: int) -> str:
    """The enumerator name of a status ("JITUNE_ERROR_CUDA")."""
    return lib.jitune_status_name(status).decode()


def version() -> str:
    """libjitune's version, "MAJOR.MINOR.PATCH"."""
    return lib.jitune_version().decode()


def check(status: int) -> None:
    """Raises the jitune.errors class of a non-zero `status` with this thread's jitune_last_error() text."""
    if status:
        raise errors.error_for(status, last_error())


def text_call(fn, *args) -> str:
    """Calls fn(*args, out, out_size, &required) and returns the text, following the C ABI's buffer protocol."""
    required = c_size_t(0)
    buf = create_string_buffer(512)
    status = fn(*args, buf, 512, byref(required))
    if status == errors.ERROR_BUFFER_TOO_SMALL:
        size = required.value
        buf = create_string_buffer(size)
        status = fn(*args, buf, size, byref(required))
    if status:
        check(status)
    return buf.value.decode("utf-8", "replace")
