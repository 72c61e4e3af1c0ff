"""Loads libkjit_c.so (kjit's C ABI, kjit/c.h) with ctypes, checks its ABI version, and turns
its status codes into kjit.Error subclasses. The library is loaded on first use, not at import,
so that a missing or mismatched library is a kjit.Error the caller can catch."""

import ctypes
import json
import os
import pathlib
import threading

#: The kjit/c.h version this package was written against (KJIT_C_ABI_VERSION), and the least
#: minor version (KJIT_C_ABI_MINOR: additions) whose functions it calls.
ABI_VERSION = 1
ABI_MINOR = 5

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


class Error(Exception):
    """A kjit failure: `code` is the status (kjit::Errc + 1), `message` the one line, `detail`
    the detail block (a compiler log with the template's line numbers) or ""."""

    code = None

    def __init__(self, message, detail="", code=None):
        super().__init__(message if not detail else message + "\n" + detail)
        self.message = message
        self.detail = detail
        if code is not None:
            self.code = code


class LibraryNotFound(Error):
    """libkjit_c.so is not where the package looks for it."""


class AbiMismatch(Error):
    """The library's kjit_abi_version() is not the one this package was written for."""


# One subclass per kjit::Errc, in kjit/c.h's order (status = Errc + 1).
_STATUS_NAMES = [
    "UnknownTemplate", "BadParameter", "BadTarget", "UnsupportedTarget", "BadOption",
    "CompileError", "CompilerUnavailable", "CacheIO", "NotPrebuilt", "BadConfig", "NoDevice",
    "DeviceError", "BadArgument", "BadArchive", "BadUsage", "FileIO", "ProcessError",
]
ERRORS = {}
for _status, _name in enumerate(_STATUS_NAMES, start=1):
    ERRORS[_status] = type(_name, (Error,), {"code": _status, "__module__": "kjit"})
Internal = type("Internal", (Error,), {"code": 100, "__module__": "kjit"})
ERRORS[100] = Internal


def error_class(name):
    return next(cls for cls in ERRORS.values() if cls.__name__ == name)


BadArgument = error_class("BadArgument")


def _candidates(variable, name, build_subdir):
    """Where a native part of kjit is looked for, in order: the file the variable names, the
    package's own copy (an installed wheel), the build tree of a source checkout."""
    explicit = os.environ.get(variable)
    if explicit:
        return [pathlib.Path(explicit)]
    repo = _PACKAGE_DIR.parent.parent
    return [_PACKAGE_DIR / "_lib" / name, repo / "build" / "release" / build_subdir / name]


def library_candidates():
    """Where libkjit_c.so is looked for (KJIT_C_LIBRARY names it)."""
    return _candidates("KJIT_C_LIBRARY", "libkjit_c.so", "capi")


class _Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_char_p),
                ("integer", ctypes.c_int64)]


class _ParamDecl(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int),
                ("types", ctypes.POINTER(ctypes.c_char_p)), ("type_count", ctypes.c_size_t),
                ("min", ctypes.c_int64), ("max", ctypes.c_int64),
                ("values", ctypes.POINTER(ctypes.c_int64)), ("value_count", ctypes.c_size_t),
                ("default_type", ctypes.c_char_p), ("has_default_integer", ctypes.c_int),
                ("default_integer", ctypes.c_int64), ("tunable", ctypes.c_int)]


_P = ctypes.c_void_p
_I = ctypes.c_int
_F = ctypes.c_float
_S = ctypes.c_char_p
_Q = ctypes.c_int64
# name: (restype, argtypes). Functions returning a status have restype c_int.
_SIGNATURES = {
    "kjit_abi_version": (ctypes.c_uint32, []),
    "kjit_abi_minor": (ctypes.c_uint32, []),
    "kjit_last_error": (_S, []),
    "kjit_last_error_detail": (_S, []),
    "kjit_runtime_create": (_I, [ctypes.POINTER(_P)]),
    "kjit_runtime_destroy": (None, [_P]),
    "kjit_template_create": (_I, [_S, _S, ctypes.POINTER(_ParamDecl), ctypes.c_size_t,
                                  ctypes.POINTER(_S), ctypes.c_size_t, _S, ctypes.POINTER(_P)]),
    "kjit_template_builtin": (_I, [_S, ctypes.POINTER(_P)]),
    "kjit_template_destroy": (None, [_P]),
    "kjit_compile": (_I, [_P, _P, ctypes.POINTER(_Param), ctypes.c_size_t, _S,
                          ctypes.POINTER(_P)]),
    "kjit_code_bytes": (None, [_P, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t)]),
    "kjit_code_key": (_S, [_P]),
    "kjit_code_target": (_S, [_P]),
    "kjit_code_origin": (_S, [_P]),
    "kjit_code_expression": (_S, [_P]),
    "kjit_code_lowered_name": (_S, [_P]),
    "kjit_code_entry_path": (_S, [_P]),
    "kjit_code_compile_ms": (ctypes.c_double, [_P]),
    "kjit_kernel_get": (_I, [_P, _P, ctypes.POINTER(_Param), ctypes.c_size_t, _I,
                             ctypes.POINTER(_P)]),
    "kjit_kernel_name": (_S, [_P]),
    "kjit_kernel_device": (_I, [_P]),
    "kjit_kernel_backend": (_S, [_P]),
    "kjit_kernel_native_handle": (_P, [_P]),
    "kjit_kernel_arg_count": (ctypes.c_size_t, [_P]),
    "kjit_kernel_arg_type": (_S, [_P, ctypes.c_size_t]),
    "kjit_kernel_arg_size": (ctypes.c_uint32, [_P, ctypes.c_size_t]),
    "kjit_kernel_arg_offset": (ctypes.c_uint32, [_P, ctypes.c_size_t]),
    "kjit_kernel_packed_size": (ctypes.c_uint32, [_P]),
    "kjit_default_device": (_I, [_P, ctypes.POINTER(_I)]),
    "kjit_rms_norm": (_I, [_P, _I, _P, _P, _P, _F, _I, _I, _P]),
    "kjit_fused_add_rms_norm": (_I, [_P, _I, _P, _P, _P, _F, _I, _I, _P]),
    "kjit_layer_norm": (_I, [_P, _I, _P, _P, _P, _P, _F, _I, _I, _P]),
    "kjit_softmax": (_I, [_P, _I, _P, _P, _F, _I, _I, _I, _P]),
    "kjit_activation": (_I, [_P, _I, _I, _P, _P, ctypes.c_int64, _P]),
    "kjit_activation_and_mul": (_I, [_P, _I, _I, _P, _P, _I, _I, _P]),
    "kjit_rotary_embedding": (_I, [_P, _I, _P, _P, _P, _P, _I, _I, _I, _I, _I, _I, _I, _P]),
    "kjit_quant_int8": (_I, [_P, _I, _P, _P, _P, _I, _I, _P]),
    "kjit_quant_fp8": (_I, [_P, _I, _P, _P, _P, _I, _I, _P]),
    "kjit_gemm": (_I, [_P, _I, _P, _P, _P, _I, _I, _I, _P]),
    "kjit_linear": (_I, [_P, _I, _P, _P, _P, _I, _I, _I, _P]),
    "kjit_flash_attention": (_I, [_P, _I, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, _I, _I, _I,
                                  _F, _P]),
    "kjit_topk_softmax": (_I, [_P, _I, _P, _P, _P, _I, _I, _I, _I, _P]),
    "kjit_moe_topk": (_I, [_P, _I, _P, _P, _P, _P, _I, _I, _I, _I, _I, _I, _I, _F, _P]),
    "kjit_fused_moe_workspace_bytes": (_I, [_I, _I, _I, _I, _I, _I,
                                            ctypes.POINTER(ctypes.c_size_t)]),
    "kjit_fused_moe": (_I, [_P, _I, _P, _P, _P, _P, _I, _I, _P, _P, _I, _I, _I, _P,
                            ctypes.c_size_t, _P]),
    "kjit_paged_attention_workspace_bytes": (_I, [_P, _I, _I, _I, _I, _I, _I, _I, _I, _I,
                                                  ctypes.POINTER(ctypes.c_size_t)]),
    "kjit_paged_attention_decode": (_I, [_P, _I, _P, _P, _I, _P, _P, _I, _I, _I, _I, _I, _F, _F,
                                         _P, _P, _I, _I, _I, _I, _F, _P, ctypes.c_size_t, _P]),
    "kjit_reshape_and_cache": (_I, [_P, _I, _P, _P, _P, _P, _I, _I, _I, _I, _I, _F, _F, _P, _I,
                                    _Q, _Q, _P, _P, _I, _I, _I, _P]),
    "kjit_gemm_fp8_scaled": (_I, [_P, _P, _P, _P, _Q, _Q, _P, _P, _Q, _Q, _I, _I, _I, _P]),
    "kjit_gemm_fp8_blockscale": (_I, [_P, _P, _P, _P, _Q, _Q, _P, _P, _Q, _Q, _I, _I, _I, _P]),
    "kjit_gemm_fp8_encoding": (_I, [_P, ctypes.POINTER(_I)]),
    "kjit_fused_moe_fp8_workspace_bytes": (_I, [_I, _I, _I, _I, _I, _I,
                                                ctypes.POINTER(ctypes.c_size_t)]),
    "kjit_fused_moe_fp8": (_I, [_P, _I, _P, _P, _P, _P, _I, _I, _P, _P, _I, _I, _I, _P, _P, _I,
                                _I, _I, _I, _I, _I, _P, ctypes.c_size_t, _P]),
    "kjit_moe_align_rows": (_I, [_I, _I, _I, ctypes.POINTER(ctypes.c_size_t)]),
    "kjit_moe_align": (_I, [_P, _P, _P, _P, _P, _P, _I, _I, _I, _P]),
    "kjit_fused_moe_ex": (_I, [_P, _I, _P, _P, _P, _P, _I, _I, _P, _P, _I, _I, _I, _P,
                               ctypes.c_size_t, _I, _P]),
    "kjit_fused_moe_fp8_ex": (_I, [_P, _I, _P, _P, _P, _P, _I, _I, _P, _P, _I, _I, _I, _P, _P,
                                   _I, _I, _I, _I, _I, _I, _P, ctypes.c_size_t, _I, _P]),
    "kjit_op_get": (_I, [_P, _S, ctypes.POINTER(_P)]),
    "kjit_free": (None, [_P]),
    "kjit_cache_stats": (_I, [ctypes.POINTER(_P)]),
    "kjit_cache_ls": (_I, [_S, _S, ctypes.POINTER(_P)]),
    "kjit_cache_verify": (_I, [ctypes.POINTER(_P)]),
    "kjit_cache_prune": (_I, [_S, _S, ctypes.POINTER(_P)]),
    "kjit_cache_clear": (_I, [ctypes.POINTER(_P)]),
    "kjit_tune": (_I, [_S, _S, ctypes.c_double, ctypes.POINTER(_S), ctypes.c_size_t,
                       ctypes.POINTER(_P)]),
    "kjit_prebuild": (_I, [_S, _S, ctypes.POINTER(_S), ctypes.c_size_t, _S, _I, _S,
                           ctypes.POINTER(_P)]),
}

#: The operator functions above that kjit_op_get finds by name: those whose first parameter is the
#: runtime and last the stream.
OPERATORS = ("rms_norm", "fused_add_rms_norm", "layer_norm", "softmax", "activation",
             "activation_and_mul", "rotary_embedding", "quant_int8", "quant_fp8", "gemm", "linear",
             "flash_attention", "topk_softmax", "moe_topk", "fused_moe", "paged_attention_decode",
             "reshape_and_cache", "gemm_fp8_scaled", "gemm_fp8_blockscale", "fused_moe_fp8",
             "moe_align", "fused_moe_ex", "fused_moe_fp8_ex")

def once(make):
    """A function that returns make()'s result, made on its first call (by one thread)."""
    lock, made = threading.Lock(), []

    def get():
        if not made:
            with lock:
                if not made:
                    made.append(make())
        return made[0]

    return get



class _Library:
    """The loaded library: one ctypes function per kjit/c.h declaration, as attributes."""

    def __init__(self, path):
        self.path = path
        cdll = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(cdll, name)
            function.restype = restype
            function.argtypes = argtypes
            setattr(self, name[len("kjit_"):], function)
        # The launch keeps the GIL: it is one short driver call, and releasing and taking the GIL
        # back would cost more than the call's own checks.
        for name in ("kjit_kernel_launch_packed", "kjit_op_launch_packed"):
            launch = getattr(ctypes.PyDLL(str(path)), name)
            launch.restype = ctypes.c_int
            launch.argtypes = [_P, _P]
            setattr(self, name[len("kjit_"):], launch)


def _load():
    tried = []
    for path in library_candidates():
        if not path.is_file():
            tried.append(f"{path} (absent)")
            continue
        try:
            abi = ctypes.CDLL(str(path)).kjit_abi_version
        except (OSError, AttributeError) as error:
            tried.append(f"{path} ({error})")
            continue
        abi.restype = ctypes.c_uint32
        version = abi()
        minor = getattr(ctypes.CDLL(str(path)), "kjit_abi_minor", lambda: 0)()
        if version != ABI_VERSION or minor < ABI_MINOR:
            raise AbiMismatch(f"{path} has kjit C ABI version {version}.{minor}, this kjit package "
                              f"needs {ABI_VERSION}.{ABI_MINOR} or a later minor: install the "
                              "package and the library of one build")
        return _Library(path)
    raise LibraryNotFound("kjit: libkjit_c.so not found; looked at " + ", ".join(tried) +
                          " (set KJIT_C_LIBRARY to its path, or build it: cmake --build "
                          "--preset release --target kjit_c)")


#: The library, loaded on the first call. Raises LibraryNotFound or AbiMismatch.
lib = once(_load)


def _load_fastlaunch():
    """The kjit._fastlaunch module, or None where it is not built or does not load (an older
    interpreter, another platform): the package then launches through ctypes."""
    import importlib.util
    for path in _candidates("KJIT_FASTLAUNCH", "_fastlaunch.abi3.so", "python/fastlaunch"):
        if not path.is_file():
            continue
        try:
            spec = importlib.util.spec_from_file_location("kjit._fastlaunch", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        except ImportError:
            return None
    return None


#: kjit._fastlaunch or None, looked for once.
fastlaunch = once(_load_fastlaunch)


def last_error(status):
    """The kjit.Error subclass instance for `status`, with the thread's last error."""
    native = lib()
    message = native.last_error().decode(errors="replace")
    detail = native.last_error_detail().decode(errors="replace")
    return ERRORS.get(status, Internal)(message, detail, code=status)


def check(status):
    if status:
        raise last_error(status)


def text(value):
    """A str argument as the C ABI takes it: bytes, or None (the default) for None."""
    return None if value is None else str(value).encode()


def texts(values):
    """A list of str as a C array of char pointers, and its length."""
    values = [str(v).encode() for v in values]
    return (ctypes.c_char_p * max(len(values), 1))(*values), len(values)


def document(function, *args):
    """The JSON document that the kjit/c.h function kjit_<function>(args..., char **json) returns
    (the `kjit` command's --json document for the same request), parsed."""
    native = lib()
    result = ctypes.c_void_p()
    check(getattr(native, function)(*args, ctypes.byref(result)))
    try:
        return json.loads(ctypes.string_at(result.value).decode())
    finally:
        native.free(result.value)
