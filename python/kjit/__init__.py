"""kjit from Python: templates compiled and cached by kjit, kernels launched on torch tensors
(or any object with __cuda_array_interface__ or __dlpack__), and kjit's operators.

    import kjit
    rt = kjit.Runtime()                                 # configured from KJIT_* variables
    code = rt.compile(tmpl, {"T": "half", "N": 4096}, "gfx90a")
    k = rt.kernel(tmpl, {"T": "half", "N": 4096})       # loaded on the GPU
    k(x, 2.0, grid=16, block=256)                       # torch's current stream

Everything goes through libkjit_c.so (kjit/c.h), loaded on first use; failures are kjit.Error
subclasses carrying kjit's one-line message."""

import os as _os
import pathlib as _pathlib

from . import cache
from ._core import (CodeObject, Kernel, Param, Runtime, Template, capturing, default_runtime,
                    integer, one_of, types)
from ._native import ABI_VERSION, ERRORS, AbiMismatch, Error, LibraryNotFound
from ._warmup import prebuild, tune, warmup

# The kjit.Error subclass of each status: kjit.BadParameter, kjit.CompileError, kjit.NoDevice...
for _cls in ERRORS.values():
    globals()[_cls.__name__] = _cls

# A wheel built with PREBUILD_KERNELS and GPU_ARCHS carries a prebuilt tier; it serves unless
# KJIT_PREBUILT_DIR names another.
_wheel_tier = _pathlib.Path(__file__).resolve().parent / "_lib" / "prebuilt"
if _wheel_tier.is_dir():
    _os.environ.setdefault("KJIT_PREBUILT_DIR", str(_wheel_tier))


def __getattr__(name):
    # kjit.ops needs torch; it is imported when first named, never by `import kjit`.
    if name == "ops":
        import importlib
        return importlib.import_module("kjit.ops")
    raise AttributeError(f"module 'kjit' has no attribute {name!r}")
