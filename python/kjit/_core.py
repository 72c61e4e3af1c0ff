"""Templates, the Runtime, code objects and kernels over kjit's C ABI."""

import ctypes
import functools
import numbers
import operator
import os
import struct
import sys
import threading

from . import _native
from ._native import BadArgument, Error, check, lib

# ---- parameter schemas --------------------------------------------------------------------

_TYPE, _INTEGER, _ONE_OF = 0, 1, 2


class Param:
    """What values a template parameter accepts; made by types(), integer() or one_of()."""

    def __init__(self, kind, types=(), low=0, high=0, values=(), default=None, tunable=False):
        self.kind, self.types, self.low, self.high = kind, tuple(types), low, high
        self.values, self.default, self.is_tunable = tuple(values), default, tunable

    def tunable(self):
        """This parameter changes how the kernel runs, not what it computes (a tuner picks it)."""
        return Param(self.kind, self.types, self.low, self.high, self.values, self.default, True)


def types(*names, default=None):
    """A type parameter: one of these C++ type names ("float", "half", "bfloat16")."""
    return Param(_TYPE, types=names, default=default)


def integer(low, high, default=None):
    """An integer parameter in [low, high]."""
    return Param(_INTEGER, low=low, high=high, default=default)


def one_of(*values, default=None):
    """An integer parameter from a fixed set (tile shapes)."""
    return Param(_ONE_OF, values=values, default=default)


def _as_param(name, spec):
    if isinstance(spec, Param):
        return spec
    if isinstance(spec, range) and spec.step == 1 and len(spec):
        return integer(spec.start, spec.stop - 1)
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(v, str) for v in spec):
        return types(*spec)
    if isinstance(spec, (list, tuple)) and spec and all(
            isinstance(v, int) and not isinstance(v, bool) for v in spec):
        return one_of(*spec)
    raise _native.error_class("BadParameter")(
        f"parameter {name}: {spec!r} is no schema (kjit.types(...), kjit.integer(lo, hi), "
        "kjit.one_of(...), a list of type names or integers, or a range)")


# torch's dtypes by the names kjit's templates use for them.
_DTYPE_NAMES = {"float32": "float", "float16": "half", "bfloat16": "bfloat16",
                "float64": "double", "int32": "int", "int64": "long long", "int8": "signed char",
                "uint8": "unsigned char", "int16": "short"}


def _value(name, value):
    """(type, integer) of one parameter value: a type name, a torch dtype, or an integer."""
    if isinstance(value, str):
        return value.encode(), 0
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return None, int(value)
    dtype_name = str(value).replace("torch.", "")
    if type(value).__name__ == "dtype" and dtype_name in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype_name].encode(), 0
    raise _native.error_class("BadParameter")(
        f"parameter {name}: {value!r} is neither a type name, a torch dtype nor an integer")


def _param_array(params):
    params = dict(params or {})
    array = (_native._Param * max(len(params), 1))()
    for i, (name, value) in enumerate(params.items()):
        type_name, number = _value(name, value)
        array[i].name = str(name).encode()
        array[i].type = type_name
        array[i].integer = number
    return array, len(params)


def _params_key(params):
    return tuple(sorted((str(k), _value(k, v)) for k, v in dict(params or {}).items()))


class Template:
    """A kernel source with a parameter schema and the kernel's declared argument types:

        scale = kjit.Template("scale", source, params={"T": ["float", "half"],
                              "N": kjit.integer(1, 1 << 20)}, arguments=["T*", "float"])
    """

    def __init__(self, name, source, params=None, arguments=(), kernel=None):
        native = lib()
        specs = [(str(n), _as_param(n, s)) for n, s in dict(params or {}).items()]
        keep = []  # what the C structs point to, alive through the call
        decls = (_native._ParamDecl * max(len(specs), 1))()
        for decl, (pname, spec) in zip(decls, specs):
            decl.name = pname.encode()
            decl.kind = spec.kind
            type_names = (ctypes.c_char_p * max(len(spec.types), 1))(
                *[t.encode() for t in spec.types])
            values = (ctypes.c_int64 * max(len(spec.values), 1))(*spec.values)
            keep += [type_names, values]
            decl.types, decl.type_count = type_names, len(spec.types)
            decl.values, decl.value_count = values, len(spec.values)
            decl.min, decl.max = spec.low, spec.high
            if isinstance(spec.default, str):
                decl.default_type = spec.default.encode()
            elif spec.default is not None:
                decl.has_default_integer, decl.default_integer = 1, spec.default
            decl.tunable = int(spec.is_tunable)
        args = (ctypes.c_char_p * max(len(arguments), 1))(*[a.encode() for a in arguments])
        handle = ctypes.c_void_p()
        check(native.template_create(name.encode(), source.encode(), decls, len(specs), args,
                                     len(arguments), kernel.encode() if kernel else None,
                                     ctypes.byref(handle)))
        self._handle = handle.value
        self._destroy = native.template_destroy
        self.name, self.source, self.arguments = name, source, tuple(arguments)

    @classmethod
    def builtin(cls, name):
        """One of the templates built into kjit ("scale", "rms_norm"...: `kjit templates`)."""
        native = lib()
        handle = ctypes.c_void_p()
        check(native.template_builtin(name.encode(), ctypes.byref(handle)))
        tmpl = cls.__new__(cls)
        tmpl._handle, tmpl._destroy = handle.value, native.template_destroy
        tmpl.name, tmpl.source, tmpl.arguments = name, None, ()
        return tmpl

    def __del__(self):
        if getattr(self, "_handle", None):
            self._destroy(self._handle)
            self._handle = None

    def __repr__(self):
        return f"kjit.Template({self.name!r})"


# ---- streams and CUDA-graph capture -------------------------------------------------------


def _torch():
    """torch when the process has imported it (kjit never imports it itself), else None."""
    return sys.modules.get("torch")


def capturing():
    """Whether the current stream of torch's current device is capturing a CUDA graph."""
    torch = _torch()
    return bool(torch is not None and torch.cuda.is_available() and
                torch.cuda.is_current_stream_capturing())


def refuse_during_capture(variant, warmup_item):
    """Raises BadUsage when a CUDA graph is being captured: what follows would compile or load
    code, which a capture must never contain."""
    if capturing():
        raise _native.error_class("BadUsage")(
            f"kjit: {variant} is not loaded and a CUDA graph is being captured: a compile or a "
            f"module load cannot run inside a capture. Load it before capturing: "
            f"kjit.warmup([{warmup_item}])")


def _current_stream_function():
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        # Triton's launcher reads the stream this way: 71 ns, where
        # torch.cuda.current_stream().cuda_stream takes 4.1 us (issue 24's measurements).
        return torch._C._cuda_getCurrentRawStream
    return lambda device: 0


def _stream_handle(stream):
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, others
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise BadArgument(f"stream {stream!r} is not a stream handle (an int, a torch.cuda.Stream "
                      "or an object with .ptr)")


def _dim3(value, what):
    try:
        dims = (value,) if isinstance(value, int) else tuple(value)
    except TypeError:
        dims = ()
    if 1 <= len(dims) <= 3 and all(isinstance(d, int) and d > 0 for d in dims):
        return dims + (1,) * (3 - len(dims))
    raise BadArgument(f"{what} {value!r}: expected a positive int or a tuple of 1 to 3 of them")


# ---- arguments ----------------------------------------------------------------------------

# The DLPack device types of each backend's memory: kDLCUDA and kDLCUDAManaged, kDLROCM.
_DLPACK_DEVICE_TYPES = {"CUDA": (2, 13), "HIP": (10,)}


def _torch_backend(torch):
    """The backend of torch's "cuda" tensors: "HIP" in a build for ROCm, else "CUDA"."""
    return "HIP" if getattr(torch.version, "hip", None) else "CUDA"


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def device_pointer(value, index, type_name, device, kernel, backend):
    """The device address an argument stands for: a torch tensor (on `device`, of a torch built
    for `backend`), an object with __cuda_array_interface__ or __dlpack__ (of `backend`'s device
    types), or an int address."""
    where = f"{kernel}: argument {index} ({type_name})"
    if isinstance(value, bool) or value is None:
        raise BadArgument(f"{where} is {value!r}, not a device pointer")
    if isinstance(value, int):
        return value
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        if value.get_device() != device:
            raise BadArgument(f"{where} is a tensor on {value.device}; the kernel runs on GPU "
                              f"{device}")
        if _torch_backend(torch) != backend:
            raise BadArgument(f"{where} is a tensor of torch built for {_torch_backend(torch)}; "
                              f"the kernel runs on {backend} GPU {device}")
        return value.data_ptr()
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    if hasattr(value, "__dlpack__"):
        device_type, device_id = value.__dlpack_device__()
        if device_type not in _DLPACK_DEVICE_TYPES[backend] or device_id != device:
            raise BadArgument(f"{where} is a DLPack tensor on device ({device_type}, "
                              f"{device_id}); the kernel runs on {backend} GPU {device}")
        capsule = value.__dlpack__()
        tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
        return (tensor.data or 0) + tensor.byte_offset
    raise BadArgument(f"{where} is a {type(value).__name__}, not a tensor, an object with "
                      "__cuda_array_interface__ or __dlpack__, or an address")


# struct codes of the scalar parameter types kjit sizes (runtime/src/signature.cpp's names).
_SCALAR_CODES = {
    "float": "f", "double": "d", "bool": "?",
    "int": "i", "signed": "i", "signed int": "i", "int32_t": "i",
    "unsigned": "I", "unsigned int": "I", "uint32_t": "I",
    "long": "q", "long int": "q", "long long": "q", "long long int": "q", "int64_t": "q",
    "ptrdiff_t": "q", "unsigned long": "Q", "unsigned long long": "Q", "uint64_t": "Q",
    "size_t": "Q", "short": "h", "int16_t": "h", "unsigned short": "H", "uint16_t": "H",
    "char": "b", "signed char": "b", "int8_t": "b", "unsigned char": "B", "uint8_t": "B",
    "half": "e", "__half": "e", "_Float16": "e",
    "bfloat16": "bf16", "__nv_bfloat16": "bf16", "hip_bfloat16": "bf16",
}


def _scalar_code(type_name, size):
    bare = " ".join(w for w in type_name.split() if w not in ("const", "volatile"))
    code = _SCALAR_CODES.get(bare)
    if code == "bf16":
        return "H", "bf16"
    if code and struct.calcsize("=" + code) == size:
        return code, "float" if code in "fde" else "int"
    return f"{size}s", "bytes"  # a vector or struct: its bytes, as the caller packs them


def _bfloat16_bits(value):
    bits = struct.unpack("=I", struct.pack("=f", value))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even


def scalar(value, index, type_name, kind, kernel):
    """A Python number as the declared scalar type takes it."""
    where = f"{kernel}: argument {index} ({type_name})"
    if kind == "bytes":
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        raise BadArgument(f"{where} is a {type(value).__name__}; pass its bytes")
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or (
            kind == "int" and not isinstance(value, numbers.Integral)):
        raise BadArgument(f"{where} is a {type(value).__name__}, not "
                          f"{'an integer' if kind == 'int' else 'a number'}")
    try:
        if kind == "bf16":
            return _bfloat16_bits(float(value))
        return int(value) if kind == "int" else float(value)
    except OverflowError:  # an int past a double's range
        raise BadArgument(f"{where}: {value} does not fit a {type_name}") from None


def packed_layout(argument_types, sizes, offsets, packed_size):
    """The struct format of a packed launch (kjit_kernel_launch_packed: the launch config, then
    each argument at its offset), each argument's kind (pointer, int, float, bf16, bytes) and
    its struct code ("P" for a device pointer)."""
    layout = "=IIIIIIIIQ"  # kjit_launch_config: grid, block, shared_bytes, reserved, stream
    position = struct.calcsize(layout)
    kinds, codes = [], []
    for type_name, size, offset in zip(argument_types, sizes, offsets):
        layout += "x" * (offset - position)
        if type_name.rstrip().endswith("*"):
            code, kind = "Q", "pointer"
        else:
            code, kind = _scalar_code(type_name, size)
        layout += code
        position = offset + struct.calcsize("=" + code)
        kinds.append(kind)
        codes.append("P" if kind == "pointer" else code)
    return layout + "x" * (packed_size - position), kinds, codes


# The argument codes kjit._fastlaunch packs itself: device pointers, C integers, float, double.
_FAST_CODES = frozenset("PbBhHiIqQfd")


def _fast_launch_arguments(slow, handle, device, backend, codes, offsets, packed_size, launch):
    """kjit._fastlaunch and the arguments of its Launcher for this kernel, where that module is
    built, KJIT_PYTHON_FASTLAUNCH is not 0, `launch` is a C function and each argument is a device
    pointer, a C integer, float or double; else None."""
    module = _native.fastlaunch() if os.environ.get("KJIT_PYTHON_FASTLAUNCH") != "0" else None
    if (module is None or not isinstance(launch, ctypes._CFuncPtr) or
            not _FAST_CODES.issuperset(codes)):
        return None
    return module, (handle, ctypes.cast(launch, ctypes.c_void_p).value, "".join(codes),
                    tuple(offsets), packed_size, device, _tensor_type(backend),
                    _current_stream_function(), _native.last_error, slow)


def _tensor_type(backend):
    """torch.Tensor where torch is imported and built for `backend`, else None: the tensors that
    a launch on `backend` takes as they are (others go to device_pointer, which refuses them)."""
    torch = _torch()
    return torch.Tensor if torch is not None and _torch_backend(torch) == backend else None


def fast_launcher(slow, handle, device, backend, codes, offsets, packed_size, launch):
    """`slow` (make_launcher's launcher) with its common calls packed in C by kjit._fastlaunch
    where _fast_launch_arguments allows it, else `slow` itself. The two accept and refuse the same
    calls: _fastlaunch hands every call it does not pack to `slow`."""
    found = _fast_launch_arguments(slow, handle, device, backend, codes, offsets, packed_size,
                                   launch)
    return slow if found is None else found[0].Launcher(*found[1])


class Kernel:
    """A loaded kernel, called as k(*args, grid=..., block=..., shared_bytes=0, stream=None).

    Arguments are checked against the template's declared types (their count, tensors' device,
    numbers' kind and range) before the driver sees them; a mismatch is kjit.BadArgument. The
    stream defaults to torch's current stream on the kernel's device where torch is imported.
    `backend` is "HIP" or "CUDA": a HIP kernel takes tensors of torch built for ROCm and DLPack
    tensors of kDLROCM, a CUDA kernel those of torch built for CUDA, kDLCUDA and kDLCUDAManaged.
    `launch_path` is "C" where kjit._fastlaunch packs its launches, else "ctypes".
    """

    # A ctypes kernel's k(...) calls self._launch, the Python launcher: the property's getter is
    # C (attrgetter), so no Python frame stands between the caller and the launcher. A C kernel
    # is also a kjit._fastlaunch.Launcher (_c_kernel_class), whose own call comes first.
    __call__ = property(operator.attrgetter("_launch"))

    def __repr__(self):
        return f"kjit.Kernel({self.name}({', '.join(self.argument_types)}), GPU {self.device})"


@functools.cache
def _c_kernel_class(module):
    # A kjit._fastlaunch.Launcher and a Kernel: k(...) is the Launcher's vectorcall, so a launch
    # builds no tuple and no dict of its arguments.
    return module.kernel_type(Kernel)


def load_kernel(runtime, handle):
    """The Kernel of a kjit_kernel handle that `runtime` owns."""
    native = lib()
    name = native.kernel_name(handle).decode()
    device = native.kernel_device(handle)
    backend = native.kernel_backend(handle).decode()
    count = native.kernel_arg_count(handle)
    argument_types = tuple(native.kernel_arg_type(handle, i).decode() for i in range(count))
    offsets = [native.kernel_arg_offset(handle, i) for i in range(count)]
    packed_size = native.kernel_packed_size(handle)
    layout, kinds, codes = packed_layout(
        argument_types, [native.kernel_arg_size(handle, i) for i in range(count)], offsets,
        packed_size)
    launch = native.kernel_launch_packed
    slow = make_launcher(handle, name, device, backend, argument_types, kinds,
                         struct.Struct(layout).pack, launch)
    fast = _fast_launch_arguments(slow, handle, device, backend, codes, offsets, packed_size,
                                  launch)
    if fast is None:
        kernel = Kernel()
        kernel._launch, kernel.launch_path = slow, "ctypes"
    else:
        module, arguments = fast
        kernel = _c_kernel_class(module)(*arguments)
        kernel.launch_path = "C"
    kernel._runtime = runtime  # keeps the runtime, which owns the kernel, alive
    kernel.name, kernel.device, kernel.backend = name, device, backend
    kernel.argument_types = argument_types
    kernel.native_handle = native.kernel_native_handle(handle)  # CUfunction, hipFunction_t
    return kernel


def make_launcher(handle, name, device, backend, argument_types, kinds, pack, launch):
    """The launch function of one kernel, generated for its parameter list (as Triton's launcher
    is): each argument converted inline, one struct pack, one ctypes call."""
    count = len(kinds)
    names = [f"a{i}" for i in range(count)]
    body = [f"def launch({''.join(n + ', ' for n in names)}*, grid, block, shared_bytes, stream):"]
    for i, kind in enumerate(kinds):
        a = names[i]
        if kind == "pointer":
            body.append(f"    {a} = {a}.data_ptr() if type({a}) is _Tensor and "
                        f"{a}.get_device() == _DEVICE else _pointer({a}, {i}, _TYPES[{i}], "
                        "_DEVICE, _NAME, _BACKEND)")
        elif kind == "float":
            body.append(f"    if type({a}) is not float: {a} = _scalar({a}, {i}, _TYPES[{i}], "
                        "'float', _NAME)")
        elif kind == "int":
            body.append(f"    if type({a}) is not int: {a} = _scalar({a}, {i}, _TYPES[{i}], "
                        "'int', _NAME)")
        else:
            body.append(f"    {a} = _scalar({a}, {i}, _TYPES[{i}], {kind!r}, _NAME)")
    body += [
        "    if type(grid) is int and grid > 0: g0, g1, g2 = grid, 1, 1",
        "    else: g0, g1, g2 = _dim3(grid, 'grid')",
        "    if type(block) is int and block > 0: b0, b1, b2 = block, 1, 1",
        "    else: b0, b1, b2 = _dim3(block, 'block')",
        "    if stream is None: stream = _current_stream(_DEVICE)",
        "    elif type(stream) is not int: stream = _stream_handle(stream)",
        "    try:",
        f"        packed = _pack(g0, g1, g2, b0, b1, b2, shared_bytes, 0, stream"
        f"{''.join(', ' + n for n in names)})",
        "    except _PackErrors as error:",
        "        raise _BadArgument(f'{_NAME}: an argument or launch value does not fit its "
        "type: {error}') from None",
        "    status = _launch(_HANDLE, packed)",
        "    if status: raise _last_error(status)",
    ]
    scope = {
        "_Tensor": _tensor_type(backend) or type("NoTensor", (), {}),
        "_DEVICE": device, "_BACKEND": backend, "_TYPES": argument_types, "_NAME": name,
        "_HANDLE": handle,
        "_pointer": device_pointer, "_scalar": scalar, "_dim3": _dim3,
        "_current_stream": _current_stream_function(), "_stream_handle": _stream_handle,
        "_pack": pack, "_launch": launch,
        "_PackErrors": (struct.error, OverflowError),  # OverflowError: a float past float32
        "_BadArgument": BadArgument, "_last_error": _native.last_error,
    }
    exec("\n".join(body), scope)  # the source is built above from kjit's own strings only
    generated = scope["launch"]
    signature = f"{name}({', '.join(argument_types)})"

    def launcher(*args, grid, block, shared_bytes=0, stream=None):
        if len(args) != count:
            raise BadArgument(f"{signature} takes {count} arguments, {len(args)} given")
        return generated(*args, grid=grid, block=block, shared_bytes=shared_bytes, stream=stream)

    return launcher


# ---- the runtime --------------------------------------------------------------------------


class CodeObject:
    """A compiled variant: `code` (bytes of the AMDGPU ELF or cubin), `key` (64 hex digits),
    `origin` ("compiled", "user cache", "prebuilt", "remote"), `compile_ms`, `target`,
    `expression`, `lowered_name`, `entry_path`."""

    def __init__(self, handle):
        native = lib()
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        native.code_bytes(handle, ctypes.byref(data), ctypes.byref(size))
        self.code = ctypes.string_at(data.value, size.value)
        self.key = native.code_key(handle).decode()
        self.target = native.code_target(handle).decode()
        self.origin = native.code_origin(handle).decode()
        self.expression = native.code_expression(handle).decode()
        self.lowered_name = native.code_lowered_name(handle).decode()
        self.entry_path = native.code_entry_path(handle).decode()
        self.compile_ms = native.code_compile_ms(handle)

    def __repr__(self):
        return f"kjit.CodeObject({self.expression} for {self.target}, {self.origin})"


class Runtime:
    """kjit's runtime, configured from the KJIT_* variables as kjit::Runtime is."""

    def __init__(self):
        native = lib()
        handle = ctypes.c_void_p()
        check(native.runtime_create(ctypes.byref(handle)))
        self._handle = handle.value
        self._destroy = native.runtime_destroy
        self._kernels = {}
        self._lock = threading.Lock()

    def __del__(self):
        if getattr(self, "_handle", None):
            self._destroy(self._handle)
            self._handle = None

    def compile(self, template, params, target):
        """The variant of `template` for `params` on `target` ("gfx90a", "sm_90")."""
        array, count = _param_array(params)
        handle = ctypes.c_void_p()
        check(lib().compile(self._handle, template._handle, array, count, str(target).encode(),
                            ctypes.byref(handle)))
        return CodeObject(handle.value)

    def kernel(self, template, params, device=None):
        """The variant for the GPU `device` (an ordinal; default: KJIT_BACKEND's first GPU),
        loaded: a callable Kernel. Found again in memory on later calls; inside a CUDA-graph
        capture only such a found kernel is returned (anything else raises kjit.BadUsage)."""
        key = (id(template), _params_key(params), device)
        found = self._kernels.get(key)
        if found is not None and found[0] is template:
            return found[1]
        refuse_during_capture(
            f"kernel {template.name} {dict(params or {})}",
            f"(template, {dict(params or {})!r})")
        array, count = _param_array(params)
        handle = ctypes.c_void_p()
        check(lib().kernel_get(self._handle, template._handle, array, count,
                               -1 if device is None else int(device), ctypes.byref(handle)))
        kernel = load_kernel(self, handle.value)
        with self._lock:
            self._kernels[key] = (template, kernel)
        return kernel

    def default_device(self):
        """The ordinal of the GPU kernels and operators run on by default."""
        ordinal = ctypes.c_int()
        check(lib().default_device(self._handle, ctypes.byref(ordinal)))
        return ordinal.value


#: The process's Runtime that kjit.ops and kjit.warmup use, made on first use.
default_runtime = _native.once(Runtime)
