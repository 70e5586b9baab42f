"""jitune: CUDA kernels compiled with NVRTC and tuned per GPU and problem, for torch, CuPy and JAX arrays.

    import jitune
    y = jitune.permute(x, (0, 2, 1))                 # x: a CUDA torch / CuPy / JAX array
    print(jitune.explain("permute", x, (0, 2, 1)))   # which tuned configuration, and why

The package is a thin layer over libjitune's C ABI (include/jitune/jitune.h, loaded with ctypes):

- ops (jitune.ops): elementwise, permute, upsample_nearest2d, upsample_nearest2d_backward, index_add,
  scatter_add, dot, conv2d, reduce_rows, sum_rows, max_rows; signature, explain, tune; export_cache,
  import_cache. ShapeDtype(shape, dtype) stands for an array where only its shape and dtype matter.
- runtimes (jitune._runtime): configure() (before the first op), devices(), device_count(), warnings(),
  reload(), settings().
- errors (jitune.errors): JituneError and one subclass per C status.

jitune.torch (torch.library custom ops, autograd, torch.compile) is a separate module, imported on its own. The
modules it builds on keep these names: jitune._lib (lib, check, text_call, the struct mirrors), jitune._runtime
(runtime_for) and jitune._arrays (dtype codes, torch_dtype_codes, convert, allocate, stream_handle).
"""

from __future__ import annotations

from . import errors, ops
from ._arrays import ShapeDtype
from ._lib import version as _library_version
from ._runtime import Device, Settings, configure, device_count, devices, reload, settings, warnings
from .errors import (
    CompileError,
    CudaError,
    InvalidArgumentError,
    JituneError,
    NoDeviceError,
    OutOfMemoryError,
    StoreError,
)
from .ops import *  # noqa: F401,F403 -- the functional API: ops.__all__

__version__ = _library_version()

__all__ = [
    "__version__",
    "errors",
    "JituneError",
    "InvalidArgumentError",
    "NoDeviceError",
    "CudaError",
    "CompileError",
    "StoreError",
    "OutOfMemoryError",
    "ShapeDtype",
    "configure",
    "settings",
    "Settings",
    "devices",
    "device_count",
    "Device",
    "warnings",
    "reload",
    *ops.__all__,
]
