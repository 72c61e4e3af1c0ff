"""kjit's operators on torch tensors (kjit/ops/ops.hpp through the C ABI).

Each checks its tensors (a torch.Tensor, on kjit's GPU, of a dtype kjit computes in, contiguous,
of matching shapes) and raises kjit.BadArgument naming the operator and the tensor otherwise;
the functional form allocates the output, `out=` writes into the caller's. With torch >= 2.4
each is also a torch operator (torch.ops.kjit.rms_norm, ..._out) with a fake implementation that
only allocates, so torch.compile(fullgraph=True) traces through them without a graph break.

Inside a CUDA-graph capture an operator runs only at shapes this process has already run or
warmed up (kjit.warmup): anything else would compile or load code in the capture, and raises
kjit.BadUsage naming the variant and the warm-up item that adds it."""

import torch

from . import _core, _native
from ._native import BadArgument, check, lib

_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "relu": 3, "sigmoid": 4}

_device = None
_warm = set()  # (op, dtype, shapes, 16-byte alignment of each tensor) run in this process


def _gpu():
    global _device
    if _device is None:
        _device = _core.default_runtime().default_device()
    return _device


def _check(op, name, t, dtype=None, shape=None, dtypes=_DTYPES):
    where = f"kjit.ops.{op}: {name}"
    if not isinstance(t, torch.Tensor):
        raise BadArgument(f"{where} is a {type(t).__name__}, not a torch.Tensor")
    if t.get_device() != _gpu():
        raise BadArgument(f"{where} is on {t.device}; kjit runs on cuda:{_gpu()}")
    if dtype is not None and t.dtype != dtype:
        raise BadArgument(f"{where} is {t.dtype}, expected {dtype}")
    if dtype is None and t.dtype not in dtypes:
        raise BadArgument(f"{where} is {t.dtype}, expected one of "
                          f"{', '.join(map(str, dtypes))}")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise BadArgument(f"{where} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    if not t.is_contiguous():
        raise BadArgument(f"{where} is not contiguous (call .contiguous())")
    return t


def _launch(op, inputs, outputs, call, **item):
    """Runs `call` (a C ABI call returning a status) on torch's current stream, refusing a variant
    not yet run in this process while a CUDA graph is being captured. The variant is named by
    every tensor's dtype, shape and 16-byte alignment (what the C++ operators choose it by)."""
    tensors = inputs + outputs
    key = (op, tuple((t.dtype, tuple(t.shape), t.data_ptr() % 16 == 0) for t in tensors))
    if key not in _warm:
        shapes = [list(t.shape) for t in inputs]
        dtype = str(inputs[0].dtype).replace("torch.", "")
        _core.refuse_during_capture(
            f"kjit.ops.{op} at shapes {shapes} ({dtype})",
            repr({"op": op, "dtype": dtype, "shapes": shapes, **item}))
    check(call(torch._C._cuda_getCurrentRawStream(_gpu())))
    _warm.add(key)


def _rows(x, last):
    return x.numel() // last if last else 0


# ---- implementations: check, then write into the outputs given ---------------------------


def _rms_norm(out, x, weight, eps):
    _check("rms_norm", "x", x)
    hidden = x.shape[-1]
    _check("rms_norm", "weight", weight, x.dtype, (hidden,))
    _check("rms_norm", "out", out, x.dtype, x.shape)
    _launch("rms_norm", (x, weight), (out,), lambda s: lib().rms_norm(
        _core.default_runtime()._handle, _DTYPES[x.dtype], out.data_ptr(), x.data_ptr(),
        weight.data_ptr(), eps, _rows(x, hidden), hidden, s))


def _fused_add_rms_norm(x, residual, weight, eps):
    _check("fused_add_rms_norm", "x", x)
    hidden = x.shape[-1]
    _check("fused_add_rms_norm", "residual", residual, x.dtype, x.shape)
    _check("fused_add_rms_norm", "weight", weight, x.dtype, (hidden,))
    _launch("fused_add_rms_norm", (x, residual, weight), (), lambda s: lib().fused_add_rms_norm(
        _core.default_runtime()._handle, _DTYPES[x.dtype], x.data_ptr(), residual.data_ptr(),
        weight.data_ptr(), eps, _rows(x, hidden), hidden, s))


def _layer_norm(out, x, weight, bias, eps):
    _check("layer_norm", "x", x)
    hidden = x.shape[-1]
    _check("layer_norm", "weight", weight, x.dtype, (hidden,))
    _check("layer_norm", "bias", bias, x.dtype, (hidden,))
    _check("layer_norm", "out", out, x.dtype, x.shape)
    _launch("layer_norm", (x, weight, bias), (out,), lambda s: lib().layer_norm(
        _core.default_runtime()._handle, _DTYPES[x.dtype], out.data_ptr(), x.data_ptr(),
        weight.data_ptr(), bias.data_ptr(), eps, _rows(x, hidden), hidden, s))


def _softmax(out, x, scale, causal_queries):
    _check("softmax", "x", x)
    _check("softmax", "out", out, x.dtype, x.shape)
    cols = x.shape[-1]
    _launch("softmax", (x,), (out,), lambda s: lib().softmax(
        _core.default_runtime()._handle, _DTYPES[x.dtype], out.data_ptr(), x.data_ptr(), scale,
        _rows(x, cols), cols, causal_queries, s))


def _activation(name):
    def run(out, x):
        _check(name, "x", x)
        _check(name, "out", out, x.dtype, x.shape)
        _launch(name, (x,), (out,), lambda s: lib().activation(
            _core.default_runtime()._handle, _ACTIVATIONS[name], _DTYPES[x.dtype],
            out.data_ptr(), x.data_ptr(), x.numel(), s))
    return run


def _gated(name):
    def run(out, x):
        op = name + "_and_mul"
        _check(op, "x", x)
        if x.dim() == 0 or x.shape[-1] % 2:
            raise BadArgument(f"kjit.ops.{op}: x has shape {tuple(x.shape)}; its last "
                              "dimension must be even (2 * d)")
        d = x.shape[-1] // 2
        _check(op, "out", out, x.dtype, (*x.shape[:-1], d))
        _launch(op, (x,), (out,), lambda s: lib().activation_and_mul(
            _core.default_runtime()._handle, _ACTIVATIONS[name], _DTYPES[x.dtype],
            out.data_ptr(), x.data_ptr(), _rows(x, 2 * d), d, s))
    return run


def _rotary_embedding(positions, query, key, cos_sin_cache, head_size, is_neox):
    op = "rotary_embedding"
    _check(op, "query", query)
    tokens = positions.numel()
    _check(op, "positions", positions, torch.int64, (tokens,))
    _check(op, "cos_sin_cache", cos_sin_cache, query.dtype)
    _check(op, "key", key, query.dtype)
    if cos_sin_cache.dim() != 2:
        raise BadArgument(f"kjit.ops.{op}: cos_sin_cache has shape "
                          f"{tuple(cos_sin_cache.shape)}, expected [max_position, rotary_dim]")
    for name, t in (("query", query), ("key", key)):
        if head_size <= 0 or t.numel() % (tokens * head_size if tokens else 1):
            raise BadArgument(f"kjit.ops.{op}: {name} has shape {tuple(t.shape)}, not "
                              f"[{tokens}, heads * {head_size}]")
    q_heads = query.numel() // (tokens * head_size) if tokens else 0
    kv_heads = key.numel() // (tokens * head_size) if tokens else 0
    max_position, rotary_dim = cos_sin_cache.shape
    _launch(op, (query, key, cos_sin_cache, positions), (), lambda s: lib().rotary_embedding(
        _core.default_runtime()._handle, _DTYPES[query.dtype], positions.data_ptr(),
        query.data_ptr(), key.data_ptr(), cos_sin_cache.data_ptr(), max_position, tokens,
        q_heads, kv_heads, head_size, rotary_dim, 0 if is_neox else 1, s),
            head_size=head_size, is_neox=is_neox)


def _quant(kind):
    op = "quant_" + kind

    def run(out, scales, x):
        _check(op, "x", x)
        hidden = x.shape[-1]
        rows = _rows(x, hidden)
        out_dtypes = ({torch.int8: 0} if kind == "int8" else
                      {torch.uint8: 0, getattr(torch, "float8_e4m3fn", torch.uint8): 0})
        _check(op, "out", out, None, x.shape, dtypes=out_dtypes)
        _check(op, "scales", scales, torch.float32, (rows,))
        function = lib().quant_int8 if kind == "int8" else lib().quant_fp8
        _launch(op, (x,), (out, scales), lambda s: function(
            _core.default_runtime()._handle, _DTYPES[x.dtype], out.data_ptr(), scales.data_ptr(),
            x.data_ptr(), rows, hidden, s))
    return run


def _matmul(op, transposed):
    def run(out, a, b):
        _check(op, "a" if not transposed else "x", a)
        if a.dim() < 1 or b.dim() != 2:
            raise BadArgument(f"kjit.ops.{op}: expected a [..., k] and a 2-D "
                              f"{'weight' if transposed else 'b'}")
        k = a.shape[-1]
        n = b.shape[0] if transposed else b.shape[1]
        _check(op, "weight" if transposed else "b", b, a.dtype, (n, k) if transposed else (k, n))
        _check(op, "out", out, a.dtype, (*a.shape[:-1], n))
        m = _rows(a, k)
        function = lib().linear if transposed else lib().gemm
        _launch(op, (a, b), (out,), lambda s: function(
            _core.default_runtime()._handle, _DTYPES[a.dtype], out.data_ptr(), a.data_ptr(),
            b.data_ptr(), m, n, k, s))
    return run


# ---- the operators: (schema of the inputs, the outputs' shapes, the implementation) ---------

def _same(x, *rest):
    return [torch.empty_like(x)]


def _gated_out(x):
    return [x.new_empty((*x.shape[:-1], x.shape[-1] // 2))]


def _quant_out(kind):
    def make(x):
        dtype = torch.int8 if kind == "int8" else getattr(torch, "float8_e4m3fn", torch.uint8)
        return [x.new_empty(x.shape, dtype=dtype),
                x.new_empty((_rows(x, x.shape[-1]),), dtype=torch.float32)]
    return make


def _matmul_out(transposed):
    def make(a, b):
        return [a.new_empty((*a.shape[:-1], b.shape[0] if transposed else b.shape[1]))]
    return make


# name: (inputs' schema, outputs made from the inputs, implementation(outs..., inputs...))
_OPS = {
    "rms_norm": ("Tensor x, Tensor weight, float eps", _same, _rms_norm),
    "layer_norm": ("Tensor x, Tensor weight, Tensor bias, float eps", _same, _layer_norm),
    "softmax": ("Tensor x, float scale, int causal_queries", _same, _softmax),
    "quant_int8": ("Tensor x", _quant_out("int8"), _quant("int8")),
    "quant_fp8": ("Tensor x", _quant_out("fp8"), _quant("fp8")),
    "gemm": ("Tensor a, Tensor b", _matmul_out(False), _matmul("gemm", False)),
    "linear": ("Tensor a, Tensor b", _matmul_out(True), _matmul("linear", True)),
}
for _name in _ACTIVATIONS:
    _OPS[_name] = ("Tensor x", _same, _activation(_name))
for _name in ("silu", "gelu", "gelu_tanh"):
    _OPS[_name + "_and_mul"] = ("Tensor x", _gated_out, _gated(_name))

# In place: (schema, implementation)
_INPLACE = {
    "fused_add_rms_norm": ("Tensor(a!) x, Tensor(b!) residual, Tensor weight, float eps",
                           _fused_add_rms_norm),
    "rotary_embedding": ("Tensor positions, Tensor(a!) query, Tensor(b!) key, "
                         "Tensor cos_sin_cache, int head_size, bool is_neox", _rotary_embedding),
}


def _torch_version():
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


#: Whether the operators are torch operators (torch >= 2.4: torch.library.register_fake).
REGISTERED = _torch_version() >= (2, 4)


def _register():
    library = torch.library.Library("kjit", "FRAGMENT")
    for name, (inputs, make_outs, impl) in _OPS.items():
        count = 2 if name.startswith("quant_") else 1
        outs = [f"out{i}" for i in range(count)]
        returns = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
        library.define(f"{name}({inputs}) -> {returns}")
        mutable = ", ".join(f"Tensor({'ab'[i]}!) {o}" for i, o in enumerate(outs))
        library.define(f"{name}_out({mutable}, {inputs}) -> ()")

        def functional(*inputs, _make=make_outs, _impl=impl):
            outputs = _make(*inputs)
            _impl(*outputs, *inputs)
            return outputs[0] if len(outputs) == 1 else tuple(outputs)

        def fake(*inputs, _make=make_outs):
            outputs = _make(*inputs)
            return outputs[0] if len(outputs) == 1 else tuple(outputs)

        library.impl(name, functional, "CUDA")
        library.impl(name + "_out", impl, "CUDA")
        torch.library.register_fake(f"kjit::{name}", fake, lib=library)
        torch.library.register_fake(f"kjit::{name}_out", lambda *args: None, lib=library)
    for name, (schema, impl) in _INPLACE.items():
        library.define(f"{name}({schema}) -> ()")
        library.impl(name, impl, "CUDA")
        torch.library.register_fake(f"kjit::{name}", lambda *args: None, lib=library)
    return library


_library = _register() if REGISTERED else None


def _call(name, inputs, out):
    """The operator `name` on `inputs`: through torch.ops.kjit while torch.compile traces, else
    the implementation directly (the dispatcher's cost stays out of eager calls)."""
    make_outs, impl = _OPS[name][1], _OPS[name][2]
    if REGISTERED and torch.compiler.is_compiling():
        if out is None:
            return getattr(torch.ops.kjit, name)(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        getattr(torch.ops.kjit, name + "_out")(*outs, *inputs)
        return out
    outs = make_outs(*inputs) if out is None else list(out if isinstance(out, tuple) else (out,))
    impl(*outs, *inputs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _call_inplace(name, inputs):
    if REGISTERED and torch.compiler.is_compiling():
        getattr(torch.ops.kjit, name)(*inputs)
    else:
        _INPLACE[name][1](*inputs)


# ---- the public functions -----------------------------------------------------------------


def rms_norm(x, weight, eps=1e-6, out=None):
    """x / sqrt(mean(x^2, -1) + eps) * weight over the last dimension."""
    return _call("rms_norm", (x, weight, float(eps)), out)


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    """vLLM's, in place: residual = x + residual, then x = rms_norm(residual) * weight."""
    _call_inplace("fused_add_rms_norm", (x, residual, weight, float(eps)))


def layer_norm(x, weight, bias, eps=1e-5, out=None):
    return _call("layer_norm", (x, weight, bias, float(eps)), out)


def softmax(x, scale=1.0, causal_queries=0, out=None):
    """softmax(scale * x) over the last dimension; causal_queries as kjit/ops/softmax.hpp."""
    return _call("softmax", (x, float(scale), int(causal_queries)), out)


def _unary(name, doc):
    def op(x, out=None):
        return _call(name, (x,), out)
    op.__name__, op.__doc__ = name, doc
    return op


silu = _unary("silu", "x * sigmoid(x), element-wise.")
gelu = _unary("gelu", "x * Phi(x) (erf), element-wise.")
gelu_tanh = _unary("gelu_tanh", "torch's gelu(approximate='tanh'), element-wise.")
relu = _unary("relu", "max(x, 0), element-wise (NaN stays NaN).")
sigmoid = _unary("sigmoid", "1 / (1 + e^-x), element-wise.")
silu_and_mul = _unary("silu_and_mul", "silu(x[..., :d]) * x[..., d:] for x [..., 2d].")
gelu_and_mul = _unary("gelu_and_mul", "gelu(x[..., :d]) * x[..., d:] for x [..., 2d].")
gelu_tanh_and_mul = _unary("gelu_tanh_and_mul",
                           "gelu_tanh(x[..., :d]) * x[..., d:] for x [..., 2d].")


def rotary_embedding(positions, query, key, cos_sin_cache, head_size, is_neox=True):
    """vLLM's rotary_embedding, in place on query and key."""
    _call_inplace("rotary_embedding",
                  (positions, query, key, cos_sin_cache, int(head_size), bool(is_neox)))


quant_int8 = _unary("quant_int8", "Dynamic per-token int8 quantisation: (values int8 [..., "
                    "hidden], scales float32 [rows]).")
quant_fp8 = _unary("quant_fp8", "The same in fp8 e4m3fn (NVIDIA sm_89 and newer).")


def gemm(a, b, out=None):
    """a [m, k] @ b [k, n]."""
    return _call("gemm", (a, b), out)


def linear(x, weight, out=None):
    """x [..., k] @ weight[n, k]^T, as torch.nn.functional.linear without bias."""
    return _call("linear", (x, weight), out)


# ---- a user's own template as a torch operator --------------------------------------------


def _schema_type(type_name, params):
    """The torch schema type of one declared kernel argument: "Tensor" for a const pointer (read),
    "Tensor!" for any other pointer (the kernel may write it), else float, int or bool."""
    bare = " ".join(w for w in type_name.split() if w not in ("volatile",))
    if bare.rstrip().endswith("*"):
        return "Tensor" if "const" in bare.split() else "Tensor!"
    bare = " ".join(w for w in bare.split() if w != "const")
    value = params.get(bare)  # a type parameter: its value names the type
    if isinstance(value, str):
        bare = value
    elif value is not None and type(value).__name__ == "dtype":
        bare = _core._DTYPE_NAMES.get(str(value).replace("torch.", ""), bare)
    code = _core._SCALAR_CODES.get(bare)
    if code is None:
        return None
    return {"f": "float", "d": "float", "e": "float", "bf16": "float", "?": "bool"}.get(code, "int")


def _dims(value, args):
    return value(*args) if callable(value) else value


def custom_op(name, template, params, *, grid, block, shared_bytes=0):
    """Registers the variant of a user's `template` for `params` as the torch operator
    torch.ops.kjit.<name>, in one call, and returns a function that launches it:

        scale = kjit.ops.custom_op("my_scale", tmpl, {"T": "float"},
                                   grid=lambda x, a, n: (n + 255) // 256, block=256)
        scale(x, 2.0, x.numel())   # eager: the kernel directly; under torch.compile: the op

    The schema follows the template's declared arguments: a const pointer is a Tensor the kernel
    reads, any other pointer a Tensor it may write (Tensor(a!)), numbers float, int or bool; it
    returns nothing. `grid` and `block` are ints, tuples or functions of the call's arguments.
    Its fake implementation does nothing, so tracing touches neither the cache nor a GPU. The
    kernel is loaded on the first call (inside a CUDA-graph capture that is kjit.BadUsage: run
    it once before capturing). Needs torch >= 2.4."""
    if not REGISTERED:
        raise _native.error_class("BadUsage")(
            f"kjit.ops.custom_op needs torch >= 2.4 (torch.library.register_fake); this is "
            f"torch {torch.__version__}")
    if not str(name).isidentifier():
        raise BadArgument(f"kjit.ops.custom_op: {name!r} is not an operator name (an identifier)")
    if not template.arguments:
        raise BadArgument(f"kjit.ops.custom_op: template {template.name} declares no arguments "
                          "(kjit.Template(..., arguments=[...]))")
    params = dict(params or {})
    schema, aliases = [], iter("abcdefghijklmnopqrstuvwxyz")
    for i, type_name in enumerate(template.arguments):
        kind = _schema_type(type_name, params)
        if kind is None:
            raise BadArgument(f"kjit.ops.custom_op: argument {i} of {template.name} "
                              f"({type_name}) has no torch schema type (a pointer or a number)")
        if kind == "Tensor!":
            kind = f"Tensor({next(aliases)}!)"
        schema.append(f"{kind} a{i}")
    if hasattr(torch.ops.kjit, name):
        raise _native.error_class("BadUsage")(f"kjit.ops.custom_op: kjit::{name} is already "
                                              "registered")
    held = []

    def launch(*args):
        if not held:
            held.append(_core.default_runtime().kernel(template, params))
        held[0](*args, grid=_dims(grid, args), block=_dims(block, args),
                shared_bytes=shared_bytes)

    _library.define(f"{name}({', '.join(schema)}) -> ()")
    _library.impl(name, launch, "CUDA")
    torch.library.register_fake(f"kjit::{name}", lambda *args: None, lib=_library)
    op = getattr(torch.ops.kjit, name)

    def call(*args):
        if torch.compiler.is_compiling():
            return op(*args)
        return launch(*args)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"torch.ops.kjit.{name}: {template.name} {params} on torch tensors"
    return call


def run_manifest_item(item):
    """Runs the operator of one kjit.warmup item once on zeros: {"op", "dtype", "shapes"} with
    the shapes of its tensor inputs (as the capture error names them), outputs allocated."""
    name = item["op"]
    dtype = getattr(torch, str(item["dtype"]).replace("torch.", ""))
    device = f"cuda:{_gpu()}"
    if name == "rotary_embedding":
        query, key, cache, positions = item["shapes"]
        _rotary_embedding(torch.zeros(positions, dtype=torch.int64, device=device),
                          *[torch.zeros(shape, dtype=dtype, device=device)
                            for shape in (query, key, cache)],
                          item["head_size"], item.get("is_neox", True))
        return
    inputs = [torch.zeros(shape, dtype=dtype, device=device) for shape in item["shapes"]]
    if name in _INPLACE:
        _INPLACE[name][1](*inputs, item.get("eps", 1e-6))
        return
    scalars = {"rms_norm": [1e-6], "layer_norm": [1e-5], "softmax": [1.0, 0]}.get(name, [])
    inputs += item.get("scalars", scalars)
    make_outs, impl = _OPS[name][1], _OPS[name][2]
    impl(*make_outs(*inputs), *inputs)
