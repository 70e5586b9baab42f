"""Runtimes: one jitune_runtime per CUDA device ordinal, created on first use and shared by all threads.

Stable names other modules (jitune.torch included) use:

- ``runtime_for(device) -> int``: the runtime handle (a ``c_void_p`` value, pass it as the first argument of the
  op functions) of device ordinal `device`. The warm path is one dict look-up; only creation takes a lock.
  Raises NoDeviceError (with the driver's reason) when there is no such device.
- ``configure(...)``, ``settings()``, ``devices()``, ``warnings(device)``, ``reload()``, ``device_count()``.

Options come from ``jitune.configure()``, which must run before the first runtime exists (before the first op,
explain, tune or warnings call): afterwards it raises JituneError, because ops already issued may hold decisions
made under the old options. Calling it again with the same options is allowed. Environment variables read by the
library itself: JITUNE_CACHE_DIR (user cache folder), JITUNE_SHIPPED_CACHES (extra read-only caches),
JITUNE_CUDA_INCLUDE, JITUNE_WORKER.

Each runtime also reads the caches shipped in this package (jitune/shipped/*.sqlite) and
``configure(extra_shipped_caches=...)``. Runtimes are freed at interpreter exit after their device is synchronised
(skipped when that fails, e.g. after a kernel fault, and in a forked child, which does not own them).
"""

from __future__ import annotations

import atexit
import dataclasses
import glob
import os
import threading
from ctypes import byref, c_char_p, c_int, c_void_p

from . import _cuda
from ._lib import DeviceInfo, RuntimeOptions, check, lib, text_call
from .errors import JituneError

__all__ = [
    "runtime_for",
    "configure",
    "settings",
    "Settings",
    "devices",
    "device_count",
    "Device",
    "warnings",
    "reload",
    "shipped_caches",
]

_HERE = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_handles: dict[int, int] = {}
_owner_pid = os.getpid()


@dataclasses.dataclass(frozen=True)
class Settings:
    """How runtimes are made (jitune.configure)."""

    cache_dir: str | None = None
    tune_on_first_use: bool = False
    tune_budget: int = 0
    quiet: bool = False
    extra_shipped_caches: tuple[str, ...] = ()

    @property
    def user_cache(self) -> str | None:
        """The tuning database runtimes use, None for the library's default ($JITUNE_CACHE_DIR/tuning.sqlite,
        else ~/.cache/jitune/tuning.sqlite)."""
        return os.path.join(self.cache_dir, "tuning.sqlite") if self.cache_dir else None


_settings = Settings()


def configure(cache_dir=None, tune_on_first_use=False, tune_budget=0, quiet=False, extra_shipped_caches=()):
    """Sets the options of the runtimes jitune creates; call it before the first op.

    cache_dir: folder of the user tuning cache (tuning.sqlite) and compiled kernels (kernels/); None: the
        library's default ($JITUNE_CACHE_DIR, else ~/.cache/jitune).
    tune_on_first_use: tune a problem that has no exact tuned record the first time it is called (seconds to
        minutes for that call), storing the winner in the user cache.
    tune_budget: candidates per problem when tuning on first use (> 0 that many, 0: 48, < 0: the whole space).
    quiet: do not print cache problems to stderr (jitune.warnings() still has them).
    extra_shipped_caches: further read-only tuning databases, searched after the user cache.

    Raises JituneError when a runtime already exists and the options differ (ops may already have used the old
    ones); the same options again are accepted.
    """
    global _settings
    new = Settings(
        cache_dir=os.fspath(cache_dir) if cache_dir is not None else None,
        tune_on_first_use=bool(tune_on_first_use),
        tune_budget=int(tune_budget),
        quiet=bool(quiet),
        extra_shipped_caches=tuple(os.fspath(p) for p in extra_shipped_caches),
    )
    with _lock:
        if _handles and new != _settings:
            raise JituneError(
                "jitune.configure() must be called before the first op: runtimes already exist for device(s) "
                f"{sorted(_handles)} with {_settings}; call configure() at the start of the program"
            )
        _settings = new


def settings() -> Settings:
    """The options runtimes are (or will be) created with."""
    return _settings


def shipped_caches() -> list[str]:
    """The pre-tuned caches installed with this package (jitune/shipped/*.sqlite)."""
    return sorted(glob.glob(os.path.join(_HERE, "shipped", "*.sqlite")))


def _create(device: int, s: Settings, *, scratch: bool = False) -> int:
    """A new runtime handle for `device` (scratch: no caches at all, for reading device facts)."""
    keep = []  # the byte strings the options point at, alive during the call

    def text(value):
        b = os.fsencode(value)
        keep.append(b)
        return b

    o = RuntimeOptions.make(device=device)
    if scratch:
        o.disable_user_cache = 1
        o.disable_builtin_shipped_caches = 1
        o.disable_disk_binary_cache = 1
        o.quiet = 1
    else:
        if s.user_cache:
            o.user_cache = text(s.user_cache)
        paths = shipped_caches() + list(s.extra_shipped_caches)
        if paths:
            arr = (c_char_p * len(paths))(*[text(p) for p in paths])
            keep.append(arr)
            o.shipped_caches = arr
            o.n_shipped_caches = len(paths)
        o.quiet = int(s.quiet)
        o.tune_on_first_use = int(s.tune_on_first_use)
        o.tune_budget = s.tune_budget
    handle = c_void_p()
    check(lib.jitune_runtime_create(byref(o), byref(handle)))
    return handle.value


def runtime_for(device: int) -> int:
    """The runtime handle of CUDA device `device`, created (thread-safely) on first use."""
    handle = _handles.get(device)
    if handle is not None:
        return handle
    with _lock:
        handle = _handles.get(device)
        if handle is None:
            handle = _create(device, _settings)
            _handles[device] = handle
    return handle


def device_count() -> int:
    """CUDA devices the driver sees (0 without a driver or a GPU)."""
    n = c_int(0)
    check(lib.jitune_device_count(byref(n)))
    return n.value


@dataclasses.dataclass(frozen=True)
class Device:
    """Facts about one CUDA device, as the runtime sees them."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    max_shared_per_block_optin: int
    driver_version: int
    nvrtc_version: str
    sm_clock_mhz: int = 0  # peak clocks, 0 where the driver does not say
    memory_clock_mhz: int = 0

    @property
    def arch(self) -> str:
        """The NVRTC target, e.g. "sm_90"."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


def _device_info(handle: int) -> Device:
    info = DeviceInfo.make()
    check(lib.jitune_runtime_device(handle, byref(info)))
    return Device(
        ordinal=info.ordinal,
        name=info.name.decode("utf-8", "replace"),
        compute_capability=(info.cc_major, info.cc_minor),
        sm_count=info.sm_count,
        l2_bytes=info.l2_bytes,
        memory_bytes=info.global_memory_bytes,
        max_shared_per_block_optin=info.max_shared_per_block_optin,
        driver_version=info.driver_version,
        nvrtc_version=info.nvrtc_version.decode(),
        sm_clock_mhz=info.sm_clock_mhz,
        memory_clock_mhz=info.memory_clock_mhz,
    )


def devices() -> list[Device]:
    """Every CUDA device the driver sees ([] without a driver or a GPU). Does not fix jitune.configure()'s
    options: devices without a runtime yet are read through a temporary runtime that opens no cache."""
    out = []
    for ordinal in range(device_count()):
        handle = _handles.get(ordinal)
        if handle is not None:
            out.append(_device_info(handle))
            continue
        scratch = _create(ordinal, _settings, scratch=True)
        try:
            out.append(_device_info(scratch))
        finally:
            lib.jitune_runtime_destroy(scratch)
    return out


def warnings(device: int = 0) -> list[str]:
    """What went wrong opening the caches of device `device`'s runtime, one problem an item (each says what to do);
    [] when nothing. Creates that runtime if needed."""
    text = text_call(lib.jitune_runtime_warnings, runtime_for(device))
    return [line for line in text.splitlines() if line]


def reload() -> None:
    """Makes every runtime look its caches up again (after import_cache, or another process tuned)."""
    for handle in list(_handles.values()):
        check(lib.jitune_runtime_reload(handle))


def _forget_in_child() -> None:
    # A forked child shares no CUDA state with its parent: its handles are not its own to use or free.
    global _owner_pid
    _handles.clear()
    _owner_pid = os.getpid()


def _destroy_all() -> None:
    """Frees every runtime (at exit): after synchronising its device, so queued kernels finish first."""
    if os.getpid() != _owner_pid:
        return
    with _lock:
        items = list(_handles.items())
        _handles.clear()
    for device, handle in items:
        if _cuda.synchronize(device):
            lib.jitune_runtime_destroy(handle)
        # else: the context is broken (a kernel fault); leave it to the process's end.


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_destroy_all)

