"""kjit's operators on torch tensors (kjit/ops/ops.hpp through the C ABI).

Each checks its tensors (a torch.Tensor, on kjit's GPU, of a dtype kjit computes in, contiguous,
of matching shapes) and raises kjit.BadArgument naming the operator and the tensor otherwise;
the functional form allocates the output, `out=` writes into the caller's. With torch >= 2.4
each is also a torch operator (torch.ops.kjit.rms_norm, ..._out) with a fake implementation that
only allocates, so torch.compile(fullgraph=True) traces through them without a graph break.

Inside a CUDA-graph capture an operator runs only at shapes this process has already run or
warmed up (kjit.warmup): anything else would compile or load code in the capture, and raises
kjit.BadUsage naming the variant and the warm-up item that adds it."""

import ctypes

import torch

from . import _core, _native
from ._native import BadArgument, check, lib

_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_HALF_DTYPES = {torch.float16: 1, torch.bfloat16: 2}  # tensor-core operators: no float32
_ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "relu": 3, "sigmoid": 4}

_device = None
_warm = set()  # (op, dtype, shapes, the pointers' common alignment) run in this process


def _gpu():
    global _device
    if _device is None:
        _device = _core.default_runtime().default_device()
    return _device


def _check(op, name, t, dtype=None, shape=None, dtypes=_DTYPES):
    """t.data_ptr() once t is a contiguous torch.Tensor on kjit's GPU, of `dtype` (else one of
    `dtypes`) and `shape` (None: any); kjit.BadArgument naming the operator and `name` else."""
    if type(t) is not torch.Tensor and not isinstance(t, torch.Tensor):
        raise BadArgument(f"kjit.ops.{op}: {name} is a {type(t).__name__}, not a torch.Tensor")
    t_dtype = t.dtype
    if (t.get_device() != (_device if _device is not None else _gpu()) or
            (t_dtype != dtype if dtype is not None else t_dtype not in dtypes) or
            (shape is not None and t.shape != shape) or not t.is_contiguous()):
        _refuse(op, name, t, dtype, shape, dtypes)
    return t.data_ptr()


def _refuse(op, name, t, dtype, shape, dtypes):
    where = f"kjit.ops.{op}: {name}"
    if t.get_device() != _gpu():
        raise BadArgument(f"{where} is on {t.device}; kjit runs on cuda:{_gpu()}")
    if dtype is not None and t.dtype != dtype:
        raise BadArgument(f"{where} is {t.dtype}, expected {dtype}")
    if dtype is None and t.dtype not in dtypes:
        raise BadArgument(f"{where} is {t.dtype}, expected one of "
                          f"{', '.join(map(str, dtypes))}")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise BadArgument(f"{where} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    raise BadArgument(f"{where} is not contiguous (call .contiguous())")


# kjit_op_launch_packed's argument codes (kjit._fastlaunch's) of the C operator functions'
# parameters between the runtime and the stream.
_CODES = {ctypes.c_void_p: "P", ctypes.c_int: "i", ctypes.c_float: "f", ctypes.c_int64: "q",
          ctypes.c_size_t: "Q"}


def _make_operator(function):
    """The C ABI operator `function` ("rms_norm": kjit_rms_norm) as a Python callable taking its
    arguments between the runtime and the stream and grid=1, block=1 (kjit._fastlaunch's call,
    whose launch config carries only the stream here), launching on torch's current stream:
    packed in C by kjit._fastlaunch where that is built, else through ctypes."""
    native, runtime = lib(), _core.default_runtime()
    ctypes_function = getattr(native, function)
    current_stream, device = _core._current_stream_function(), _gpu()

    def through_ctypes(*args, grid, block, stream=None):
        check(ctypes_function(runtime._handle, *args,
                              current_stream(device) if stream is None else stream))

    handle = ctypes.c_void_p()
    check(native.op_get(runtime._handle, function.encode(), ctypes.byref(handle)))
    codes = [_CODES[t] for t in _native._SIGNATURES["kjit_" + function][1][1:-1]]
    # Its arguments are addresses and numbers, never tensors: the backend named does not matter.
    # The handle lives as long as the runtime: kjit.default_runtime(), which the process keeps.
    return _core.fast_launcher(through_ctypes, handle.value, device, _core._torch_backend(torch),
                               codes, [40 + 8 * i for i in range(len(codes))],
                               40 + 8 * len(codes), native.op_launch_packed)


_operators = {}


def _launch(op, key, tensors, function, *args, **item):
    """Calls the C ABI operator `function` with `args` on torch's current stream, refusing a
    variant not yet run in this process while a CUDA graph is being captured. `key` names the
    variant: the dtype and shapes, and the pointers' common alignment, `_aligned` (what the C++
    operators choose it by); `tensors` are the inputs, named in the warm-up item."""
    warm = key in _warm
    if not warm:
        _refuse_cold(op, tensors, item)
    call = _operators.get(function)
    if call is None:
        call = _operators.setdefault(function, _make_operator(function))
    call(*args, grid=1, block=1)
    if not warm:
        _warm.add(key)


def _refuse_cold(op, tensors, item):
    """kjit.BadUsage while a CUDA graph is being captured, naming the warm-up item that runs
    `op` on `tensors`' shapes (with `item`'s other entries; "dtypes" where the tensors' types
    differ) ahead: a variant not yet run in this process would compile or load code in the
    capture. Made only for a variant not yet run, so its parts cost the warm calls nothing."""
    shapes = [list(t.shape) for t in tensors]
    dtypes = _dtype_names(*tensors)
    if len(set(dtypes)) > 1:
        item = {"dtypes": dtypes, **item}
    _core.refuse_during_capture(f"kjit.ops.{op} at shapes {shapes} ({dtypes[0]})",
                                repr({"op": op, "dtype": dtypes[0], "shapes": shapes, **item}))


def _aligned(*pointers):
    """The pointers' common alignment below 16 bytes, as the low bits of their OR: the widest
    vector an operator picks for all of them follows from it (ops/src/launch.hpp)."""
    bits = 0
    for pointer in pointers:
        bits |= pointer
    return bits & 15


def _rows(x, last):
    return x.numel() // last if last else 0


# ---- implementations: check, then write into the outputs given ---------------------------


def _rms_norm(out, x, weight, eps):
    px = _check("rms_norm", "x", x)
    shape, dtype = x.shape, x.dtype
    hidden = shape[-1] if shape else 0
    pw = _check("rms_norm", "weight", weight, dtype, (hidden,))
    po = _check("rms_norm", "out", out, dtype, shape)
    _launch("rms_norm", ("rms_norm", dtype, shape, _aligned(px, pw, po)), (x, weight), "rms_norm",
            _DTYPES[dtype], po, px, pw, eps, _rows(x, hidden), hidden)


def _fused_add_rms_norm(x, residual, weight, eps):
    op = "fused_add_rms_norm"
    px = _check(op, "x", x)
    shape, dtype = x.shape, x.dtype
    hidden = shape[-1] if shape else 0
    pr = _check(op, "residual", residual, dtype, shape)
    pw = _check(op, "weight", weight, dtype, (hidden,))
    _launch(op, (op, dtype, shape, _aligned(px, pr, pw)), (x, residual, weight), op,
            _DTYPES[dtype], px, pr, pw, eps, _rows(x, hidden), hidden)


def _layer_norm(out, x, weight, bias, eps):
    op = "layer_norm"
    px = _check(op, "x", x)
    shape, dtype = x.shape, x.dtype
    hidden = shape[-1] if shape else 0
    pw = _check(op, "weight", weight, dtype, (hidden,))
    pb = _check(op, "bias", bias, dtype, (hidden,))
    po = _check(op, "out", out, dtype, shape)
    _launch(op, (op, dtype, shape, _aligned(px, pw, pb, po)), (x, weight, bias), op,
            _DTYPES[dtype], po, px, pw, pb, eps, _rows(x, hidden), hidden)


def _softmax(out, x, scale, causal_queries):
    px = _check("softmax", "x", x)
    shape, dtype = x.shape, x.dtype
    po = _check("softmax", "out", out, dtype, shape)
    cols = shape[-1] if shape else 0
    _launch("softmax", ("softmax", dtype, shape, _aligned(px, po)), (x,), "softmax",
            _DTYPES[dtype], po, px, scale, _rows(x, cols), cols, causal_queries)


def _activation(name):
    def run(out, x):
        px = _check(name, "x", x)
        shape, dtype = x.shape, x.dtype
        po = _check(name, "out", out, dtype, shape)
        _launch(name, (name, dtype, shape, _aligned(px, po)), (x,), "activation",
                _ACTIVATIONS[name], _DTYPES[dtype], po, px, x.numel())
    return run


def _gated(name):
    op = name + "_and_mul"

    def run(out, x):
        px = _check(op, "x", x)
        shape, dtype = x.shape, x.dtype
        if not shape or shape[-1] % 2:
            raise BadArgument(f"kjit.ops.{op}: x has shape {tuple(shape)}; its last "
                              "dimension must be even (2 * d)")
        d = shape[-1] // 2
        po = _check(op, "out", out, dtype, (*shape[:-1], d))
        _launch(op, (op, dtype, shape, _aligned(px, po)), (x,), "activation_and_mul",
                _ACTIVATIONS[name], _DTYPES[dtype], po, px, _rows(x, 2 * d), d)
    return run


def _rotary_embedding(positions, query, key, cos_sin_cache, head_size, is_neox):
    op = "rotary_embedding"
    pq = _check(op, "query", query)
    tokens = positions.numel()
    pp = _check(op, "positions", positions, torch.int64, (tokens,))
    pc = _check(op, "cos_sin_cache", cos_sin_cache, query.dtype)
    pk = _check(op, "key", key, query.dtype)
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
    key_ = (op, query.dtype, query.shape, key.shape, cos_sin_cache.shape, tokens, head_size,
            is_neox, _aligned(pq, pk, pc, pp))
    _launch(op, key_, (query, key, cos_sin_cache, positions), op, _DTYPES[query.dtype], pp, pq,
            pk, pc, max_position, tokens, q_heads, kv_heads, head_size, rotary_dim,
            0 if is_neox else 1, head_size=head_size, is_neox=is_neox)


def _quant(kind):
    op = "quant_" + kind
    out_dtypes = ({torch.int8: 0} if kind == "int8" else
                  {torch.uint8: 0, getattr(torch, "float8_e4m3fn", torch.uint8): 0})

    def run(out, scales, x):
        px = _check(op, "x", x)
        shape, dtype = x.shape, x.dtype
        hidden = shape[-1] if shape else 0
        rows = _rows(x, hidden)
        po = _check(op, "out", out, None, shape, dtypes=out_dtypes)
        ps = _check(op, "scales", scales, torch.float32, (rows,))
        _launch(op, (op, dtype, shape, _aligned(px, po, ps)), (x,), op, _DTYPES[dtype], po, ps,
                px, rows, hidden)
    return run


def _matmul(op, transposed):
    def run(out, a, b):
        pa = _check(op, "a" if not transposed else "x", a)
        if a.dim() < 1 or b.dim() != 2:
            raise BadArgument(f"kjit.ops.{op}: expected a [..., k] and a 2-D "
                              f"{'weight' if transposed else 'b'}")
        k = a.shape[-1]
        n = b.shape[0] if transposed else b.shape[1]
        pb = _check(op, "weight" if transposed else "b", b, a.dtype,
                    (n, k) if transposed else (k, n))
        po = _check(op, "out", out, a.dtype, (*a.shape[:-1], n))
        m = _rows(a, k)
        _launch(op, (op, a.dtype, a.shape, b.shape, _aligned(pa, pb, po)), (a, b), op,
                _DTYPES[a.dtype], po, pa, pb, m, n, k)
    return run


def _dtype_names(*tensors):
    """The tensors' dtypes as a warm-up item names them (its "dtypes": inputs of several types)."""
    return [str(t.dtype).replace("torch.", "") for t in tensors]


def _require_dims(op, name, t, layout):
    """kjit.BadArgument unless t has as many dimensions as `layout` names ("[tokens, hidden]")."""
    if t.dim() != layout.count(",") + 1:
        raise BadArgument(f"kjit.ops.{op}: {name} has shape {tuple(t.shape)}, expected {layout}")


# ---- attention (kjit/ops/flash_attention.hpp) ----------------------------------------------


def _flash_attention(out, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, scale):
    op = "flash_attention"
    pq = _check(op, "q", q, dtypes=_HALF_DTYPES)
    _require_dims(op, "q", q, "[total_q, q_heads, head_dim]")
    dtype, (total_q, q_heads, head_dim) = q.dtype, q.shape
    _check(op, "k", k, dtype)
    _require_dims(op, "k", k, "[total_k, kv_heads, head_dim]")
    total_k, kv_heads = k.shape[0], k.shape[1]
    pk = _check(op, "k", k, dtype, (total_k, kv_heads, head_dim))
    pv = _check(op, "v", v, dtype, k.shape)
    pcq = _check(op, "cu_seqlens_q", cu_seqlens_q, torch.int32)
    if cu_seqlens_q.dim() != 1 or cu_seqlens_q.numel() < 1:
        raise BadArgument(f"kjit.ops.{op}: cu_seqlens_q has shape {tuple(cu_seqlens_q.shape)}, "
                          "expected [batch + 1]")
    batch = cu_seqlens_q.numel() - 1
    pck = _check(op, "cu_seqlens_k", cu_seqlens_k, torch.int32, cu_seqlens_q.shape)
    po = _check(op, "out", out, dtype, q.shape)
    key = (op, dtype, q.shape, k.shape, batch, max_seqlen_q, causal, _aligned(pq, pk, pv, po))
    _launch(op, key, (q, k, v, cu_seqlens_q, cu_seqlens_k), op, _DTYPES[dtype], po, pq, pk, pv,
            pcq, pck, batch, total_q, total_k, max_seqlen_q, q_heads, kv_heads, head_dim,
            int(causal), scale, scalars=[max_seqlen_q, causal, scale])


# ---- mixture of experts (kjit/ops/moe.hpp) --------------------------------------------------

_SCORINGS = {"softmax": 0, "sigmoid": 1}


def _routing_outputs(op, weights, ids, logits, top_k):
    """The addresses of logits [tokens, experts] and the outputs weights (float32) and ids
    (int32), [tokens, top_k] each, once checked."""
    pl = _check(op, "logits", logits)
    _require_dims(op, "logits", logits, "[tokens, experts]")
    pw = _check(op, "weights", weights, torch.float32, (logits.shape[0], top_k))
    pi = _check(op, "ids", ids, torch.int32, (logits.shape[0], top_k))
    return pl, pw, pi


def _topk_softmax(weights, ids, logits, top_k, renormalize):
    op = "topk_softmax"
    pl, pw, pi = _routing_outputs(op, weights, ids, logits, top_k)
    tokens, experts = logits.shape
    _launch(op, (op, logits.dtype, logits.shape, top_k), (logits,), op, _DTYPES[logits.dtype], pw,
            pi, pl, tokens, experts, top_k, int(renormalize), scalars=[top_k, renormalize])


def _moe_topk(weights, ids, logits, top_k, bias, scoring, groups, top_groups, renormalize, scale):
    op = "moe_topk"
    pl, pw, pi = _routing_outputs(op, weights, ids, logits, top_k)
    tokens, experts = logits.shape
    pb = 0 if bias is None else _check(op, "bias", bias, torch.float32, (experts,))
    key = (op, logits.dtype, logits.shape, top_k, bias is None, scoring, groups, top_groups)
    tensors = (logits,) if bias is None else (logits, bias)
    _launch(op, key, tensors, op, _DTYPES[logits.dtype], pw, pi, pl, pb, tokens, experts, top_k,
            scoring, groups, top_groups, int(renormalize), scale,
            scalars=[top_k, scoring, groups, top_groups, renormalize, scale])


_workspace_bytes = {}  # (size function, dtype, tokens, top_k, experts, hidden, inter): bytes
_WORKSPACE_ALIGNMENT = 256  # kjit/ops/moe.hpp: fused_moe's workspace


def _moe_workspace(function, x, sizes):
    """A workspace for the fused_moe form whose size the C ABI's `function` gives for `sizes`
    (tokens, top_k, experts, hidden, inter): (the block, its 256-byte aligned address, the bytes
    from there). fused_moe needs that alignment, which torch's allocator does not promise
    everywhere; the block is reused after the return only in order on the current stream, where
    the operator runs."""
    key = (function, x.dtype, *sizes)
    size = _workspace_bytes.get(key)
    if size is None:
        out = ctypes.c_size_t()
        check(getattr(lib(), function)(_DTYPES[x.dtype], *sizes, ctypes.byref(out)))
        size = _workspace_bytes.setdefault(key, out.value)
    workspace = torch.empty(size + _WORKSPACE_ALIGNMENT - 1, dtype=torch.uint8, device=x.device)
    address = -(-workspace.data_ptr() // _WORKSPACE_ALIGNMENT) * _WORKSPACE_ALIGNMENT
    return workspace, address, size


def _moe_layer(op, out, x, weights, ids, w13, w2, fp8):
    """fused_moe's tensors checked: x and out [tokens, hidden] of float16 or bfloat16, weights
    float32 and ids int32 [tokens, top_k], w13 [experts, 2 * inter, hidden] and w2 [experts,
    hidden, inter] of x's dtype, or with `fp8` of one e4m3fn type. Their addresses (out, x,
    weights, ids, w13, w2) and the sizes (tokens, top_k, experts, hidden, inter)."""
    px = _check(op, "x", x, dtypes=_HALF_DTYPES)
    _require_dims(op, "x", x, "[tokens, hidden]")
    dtype, (tokens, hidden) = x.dtype, x.shape
    if not fp8 and isinstance(w13, torch.Tensor) and w13.dtype in _FP8_DTYPES:
        raise BadArgument(f"kjit.ops.{op}: w13 is {w13.dtype}, expected {dtype}: e4m3 weights "
                          "with block scales are kjit.ops.fused_moe_fp8's")
    _check(op, "w13", w13, None if fp8 else dtype, dtypes=_FP8_DTYPES)
    _require_dims(op, "w13", w13, "[experts, 2 * inter, hidden]")
    experts, inter = w13.shape[0], w13.shape[1] // 2
    pw13 = _check(op, "w13", w13, w13.dtype, (experts, 2 * inter, hidden))
    pw2 = _check(op, "w2", w2, w13.dtype, (experts, hidden, inter))
    _check(op, "weights", weights, torch.float32)
    _require_dims(op, "weights", weights, "[tokens, top_k]")
    top_k = weights.shape[1]
    pweights = _check(op, "weights", weights, torch.float32, (tokens, top_k))
    pids = _check(op, "ids", ids, torch.int32, (tokens, top_k))
    po = _check(op, "out", out, dtype, x.shape)
    return (po, px, pweights, pids, pw13, pw2), (tokens, top_k, experts, hidden, inter)


def _refuse_validation_in_capture(op):
    """kjit.BadUsage while a CUDA graph is being captured: fused_moe's validate waits for the GPU
    and reads the ids back, which a capture does not allow (the capture would be invalidated)."""
    if _core.capturing():
        raise _native.error_class("BadUsage")(
            f"kjit.ops.{op}: validate=True waits for the GPU and copies the ids to the host, "
            "which a CUDA-graph capture does not allow: validate before capturing")


# The C operators take validate (fused_moe's FusedMoeOptions) in their _ex forms (C ABI 1.5).
def _fused_moe(out, x, weights, ids, w13, w2, validate=False):
    op = "fused_moe"
    if validate:
        _refuse_validation_in_capture(op)
    (po, px, pweights, pids, pw13, pw2), sizes = _moe_layer(op, out, x, weights, ids, w13, w2,
                                                            False)
    tokens, top_k, experts, hidden, inter = sizes
    workspace, pworkspace, size = _moe_workspace("fused_moe_workspace_bytes", x, sizes)
    key = (op, x.dtype, x.shape, w13.shape, top_k, _aligned(px, pw13, pw2, po))
    _launch(op, key, (x, weights, ids, w13, w2), "fused_moe_ex", _DTYPES[x.dtype], po, px,
            pweights, pids, tokens, top_k, pw13, pw2, experts, hidden, inter, pworkspace, size,
            int(validate))


def _fused_moe_fp8(out, x, weights, ids, w13, w2, w13_scales, w2_scales, validate=False):
    op = "fused_moe_fp8"
    if validate:
        _refuse_validation_in_capture(op)
    (po, px, pweights, pids, pw13, pw2), sizes = _moe_layer(op, out, x, weights, ids, w13, w2,
                                                            True)
    tokens, top_k, experts, hidden, inter = sizes
    # The scales' shapes go to the C++ operator, which names the one it refuses.
    ps13 = _check(op, "w13_scales", w13_scales, torch.float32)
    _require_dims(op, "w13_scales", w13_scales, "[experts, 2 * inter / 128, hidden / 128]")
    ps2 = _check(op, "w2_scales", w2_scales, torch.float32)
    _require_dims(op, "w2_scales", w2_scales, "[experts, hidden / 128, inter / 128]")
    workspace, pworkspace, size = _moe_workspace("fused_moe_fp8_workspace_bytes", x, sizes)
    key = (op, x.dtype, x.shape, w13.shape, top_k, _aligned(px, pw13, pw2, po))
    _launch(op, key, (x, weights, ids, w13, w2, w13_scales, w2_scales), "fused_moe_fp8_ex",
            _DTYPES[x.dtype], po, px, pweights, pids, tokens, top_k, pw13, ps13, *w13_scales.shape,
            pw2, ps2, *w2_scales.shape, experts, hidden, inter, pworkspace, size, int(validate))


def _align_rows(pairs, experts, block_m):
    """kjit::ops::moe_align_rows (kjit_moe_align_rows), computed here from the sizes alone so that
    the fake implementation needs no library: each expert's run rounded up to block_m, at most
    ceil(pairs / block_m) tiles plus one partial tile for each expert that has pairs."""
    return (-(-pairs // block_m) + min(experts, pairs)) * block_m


def _moe_align(sorted_pairs, block_experts, pair_positions, totals, ids, experts, block_m=128):
    op = "moe_align"
    pi = _check(op, "ids", ids, torch.int32)
    pairs = ids.numel()
    rows = _align_rows(pairs, experts, block_m)
    ps = _check(op, "sorted_pairs", sorted_pairs, torch.int32, (rows,))
    pb = _check(op, "block_experts", block_experts, torch.int32, (rows // block_m,))
    pp = _check(op, "pair_positions", pair_positions, torch.int32, ids.shape)
    pt = _check(op, "totals", totals, torch.int32, (2,))
    if pairs == 0:  # nothing to sort (and no memory to point at): no tiles, no ids out of range
        totals.zero_()
        return
    _launch(op, (op, ids.shape, experts, block_m), (ids,), op, ps, pb, pp, pt, pi, pairs, experts,
            block_m, scalars=[experts, block_m])


# ---- paged attention and the KV-cache write (kjit/ops/paged_attention.hpp) -----------------

# fp8 e4m3fn bytes: torch's float8_e4m3fn where it has one (torch >= 2.1), or uint8 holding them.
_FP8_DTYPES = {torch.uint8: 0, **({torch.float8_e4m3fn: 0} if hasattr(torch, "float8_e4m3fn")
                                  else {})}
_KV_MODEL, _KV_FP8 = 0, 1  # kjit_kv_format


def _paged_cache(op, names, k_cache, v_cache, dtype, last):
    """The addresses of the caches (`names` theirs) [num_blocks, page_size, kv_heads, head_dim],
    of `dtype` or fp8 and whose last dimensions are `last` (the inputs'), once checked, and their
    kjit_kv_format."""
    k_name, v_name = names
    pk = _check(op, k_name, k_cache, dtypes={dtype: 0, **_FP8_DTYPES})
    _require_dims(op, k_name, k_cache, "[num_blocks, page_size, kv_heads, head_dim]")
    if k_cache.shape[-len(last):] != last:
        raise BadArgument(f"kjit.ops.{op}: {k_name} has shape {tuple(k_cache.shape)}, its last "
                          f"dimensions must be {tuple(last)} as the inputs'")
    pv = _check(op, v_name, v_cache, k_cache.dtype, k_cache.shape)
    return pk, pv, _KV_MODEL if k_cache.dtype == dtype else _KV_FP8


_decode_workspace = {}  # the sizes kjit_paged_attention_workspace_bytes takes: its bytes


def _paged_attention_decode(out, q, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len,
                            k_scale, v_scale, validate):
    op = "paged_attention_decode"
    pq = _check(op, "q", q, dtypes=_HALF_DTYPES)
    _require_dims(op, "q", q, "[batch, q_heads, head_dim]")
    dtype, (batch, q_heads, head_dim) = q.dtype, q.shape
    pk, pv, kv_format = _paged_cache(op, ("k_cache", "v_cache"), k_cache, v_cache, dtype,
                                     (head_dim,))
    num_blocks, page_size, kv_heads = k_cache.shape[:3]
    pt = _check(op, "block_tables", block_tables, torch.int32)
    _require_dims(op, "block_tables", block_tables, "[batch, max_blocks]")
    max_blocks = block_tables.shape[1]
    if block_tables.shape[0] != batch:
        _refuse(op, "block_tables", block_tables, torch.int32, (batch, max_blocks), None)
    ps = _check(op, "seq_lens", seq_lens, torch.int32, (batch,))
    po = _check(op, "out", out, dtype, q.shape)
    tensors = (q, k_cache, v_cache, block_tables, seq_lens)
    item = {"scalars": [scale, max_seq_len, k_scale, v_scale, validate]}
    sizes = (q_heads, num_blocks, page_size, kv_heads, head_dim, kv_format, batch, max_blocks,
             max_seq_len)
    size = _decode_workspace.get(sizes)
    if size is None:  # finding it compiles the kernel: refused in a capture like the call
        _refuse_cold(op, tensors, item)
        bytes_ = ctypes.c_size_t()
        check(lib().paged_attention_workspace_bytes(_core.default_runtime()._handle, *sizes,
                                                    ctypes.byref(bytes_)))
        size = _decode_workspace.setdefault(sizes, bytes_.value)
    # Split-KV's partial results, reused after the return only in order on the current stream.
    workspace = torch.empty(size, dtype=torch.uint8, device=q.device) if size else None
    key = (op, dtype, sizes, _aligned(pq, pk, pv, po))
    _launch(op, key, tensors, op, _DTYPES[dtype], po, pq, q_heads, pk, pv, num_blocks, page_size,
            kv_heads, head_dim, kv_format, k_scale, v_scale, pt, ps, batch, max_blocks,
            max_seq_len, int(validate), scale, workspace.data_ptr() if size else 0, size, **item)


def _rows_of(op, name, t, dtype, shape):
    """The address and row stride (elements) of t [tokens, kv_heads, head_dim] of `dtype` (None:
    either 16-bit type) and `shape` (None: any), on kjit's GPU, whose rows may lie apart (a slice
    of a fused qkv) but each contiguous; kjit.BadArgument naming it else."""
    if not isinstance(t, torch.Tensor):
        raise BadArgument(f"kjit.ops.{op}: {name} is a {type(t).__name__}, not a torch.Tensor")
    _require_dims(op, name, t, "[tokens, kv_heads, head_dim]")
    if (t.get_device() != _gpu() or (t.dtype != dtype if dtype is not None else
                                     t.dtype not in _HALF_DTYPES) or
            (shape is not None and t.shape != shape)):
        _refuse(op, name, t, dtype, shape, _HALF_DTYPES)
    tokens, heads, dim = t.shape
    row = heads * dim
    stride = t.stride(0) if tokens > 1 else row  # a dimension of one has any stride
    if t.stride(2) != 1 or (heads > 1 and t.stride(1) != dim) or stride < row:
        raise BadArgument(f"kjit.ops.{op}: {name} has strides {tuple(t.stride())}: each token's "
                          "[kv_heads, head_dim] must be contiguous, the tokens at least that far "
                          "apart")
    return t.data_ptr(), stride


def _reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale,
                       positions, cos_sin_cache, is_neox):
    op = "reshape_and_cache"
    pkey, key_stride = _rows_of(op, "key", key, None, None)
    dtype, (tokens, kv_heads, head_dim) = key.dtype, key.shape
    pvalue, value_stride = _rows_of(op, "value", value, dtype, key.shape)
    pk, pv, kv_format = _paged_cache(op, ("key_cache", "value_cache"), key_cache, value_cache,
                                     dtype, (kv_heads, head_dim))
    num_blocks, page_size = key_cache.shape[:2]
    ps = _check(op, "slot_mapping", slot_mapping, torch.int64, (tokens,))
    tensors = (key, value, key_cache, value_cache, slot_mapping)
    if (positions is None) != (cos_sin_cache is None):
        raise BadArgument(f"kjit.ops.{op}: positions and cos_sin_cache come together (RoPE on "
                          "the keys) or not at all")
    pp = pc = max_position = rotary_dim = 0
    if positions is not None:
        pp = _check(op, "positions", positions, torch.int64, (tokens,))
        pc = _check(op, "cos_sin_cache", cos_sin_cache, dtype)
        _require_dims(op, "cos_sin_cache", cos_sin_cache, "[max_position, rotary_dim]")
        max_position, rotary_dim = cos_sin_cache.shape
        tensors += (positions, cos_sin_cache)
    key_ = (op, dtype, key.shape, key_cache.shape, key_cache.dtype, key_stride, value_stride,
            rotary_dim, is_neox, _aligned(pkey, pvalue, pk, pv, pc))
    # The warm-up item reproduces the rows' strides and the inputs' offsets within 16 bytes: the
    # C++ operator picks its vector width by both.
    size = key.element_size()
    _launch(op, key_, tensors, op, _DTYPES[dtype], pkey, pvalue, pk, pv, num_blocks, page_size,
            kv_heads, head_dim, kv_format, k_scale, v_scale, ps, tokens, key_stride, value_stride,
            pp, pc, max_position, rotary_dim, 0 if is_neox else 1,
            scalars=[k_scale, v_scale, is_neox],
            strides=[key_stride, value_stride],
            offsets=[(pkey & 15) // size, (pvalue & 15) // size])


# ---- FP8 GEMM (kjit/ops/gemm_fp8.hpp) -------------------------------------------------------


_FNUZ = getattr(torch, "float8_e4m3fnuz", None)
# What gemm_fp8 takes a and b as: each fp8 dtype and the kjit_fp8_encoding it holds; uint8 the
# bytes of the encoding kjit's GPU reads (unchecked: bytes do not say which).
_GEMM_FP8_ENCODINGS = {torch.uint8: None,
                       **({torch.float8_e4m3fn: 0} if hasattr(torch, "float8_e4m3fn") else {}),
                       **({_FNUZ: 1} if _FNUZ is not None else {})}
_ENCODING_DTYPES = ("torch.float8_e4m3fn", "torch.float8_e4m3fnuz")  # by kjit_fp8_encoding
_gemm_encoding = None  # kjit_gemm_fp8_encoding of kjit's GPU, asked once


def _gemm_fp8_encoding():
    """The kjit_fp8_encoding gemm_fp8 reads its operands in on kjit's GPU: e4m3fnuz on gfx942,
    e4m3fn elsewhere."""
    global _gemm_encoding
    if _gemm_encoding is None:
        encoding = ctypes.c_int()
        check(lib().gemm_fp8_encoding(_core.default_runtime()._handle, ctypes.byref(encoding)))
        _gemm_encoding = encoding.value
    return _gemm_encoding


def _scale_shape(scale):
    """A scale tensor's [rows, columns] as the C ABI takes it: a one-element tensor of any rank
    (torch._scaled_mm's per-tensor scale) is [1, 1]; otherwise it must be 2-D."""
    if scale.numel() == 1 and scale.dim() <= 2:
        return 1, 1
    return tuple(scale.shape) if scale.dim() == 2 else None


def _gemm_fp8(out, a, b, scale_a, scale_b):
    op = "gemm_fp8"
    pa = _check(op, "a", a, dtypes=_GEMM_FP8_ENCODINGS)
    encoding = _GEMM_FP8_ENCODINGS[a.dtype]
    if encoding is not None and encoding != (_gemm_encoding if _gemm_encoding is not None else
                                             _gemm_fp8_encoding()):
        raise BadArgument(f"kjit.ops.{op}: a is {a.dtype}, but kjit's GPU (cuda:{_gpu()}) "
                          f"reads {_ENCODING_DTYPES[_gemm_fp8_encoding()]}: convert a and b (the "
                          "same bytes mean other values)")
    _require_dims(op, "a", a, "[m, k]")
    m, k = a.shape
    if not isinstance(b, torch.Tensor):
        raise BadArgument(f"kjit.ops.{op}: b is a {type(b).__name__}, not a torch.Tensor")
    if b.dim() != 2 or b.shape[0] != k:
        raise BadArgument(f"kjit.ops.{op}: b has shape {tuple(b.shape)}, expected ({k}, n)")
    n = b.shape[1]
    if b.get_device() != _gpu() or b.dtype != a.dtype:
        _refuse(op, "b", b, a.dtype, None, None)
    # Column-major, read by its strides (a dimension of one has any stride).
    if (k > 1 and b.stride(0) != 1) or (n > 1 and b.stride(1) != k):
        raise BadArgument(f"kjit.ops.{op}: b is not column-major: pass weight.t() of a contiguous "
                          "weight [n, k], as torch._scaled_mm takes it")
    pb = b.data_ptr()
    psa = _check(op, "scale_a", scale_a, torch.float32)
    psb = _check(op, "scale_b", scale_b, torch.float32)
    po = _check(op, "out", out, torch.bfloat16, (m, n))
    shape_a, shape_b = _scale_shape(scale_a), _scale_shape(scale_b)
    if shape_a is None or shape_b is None:
        raise BadArgument(f"kjit.ops.{op}: scale_a {tuple(scale_a.shape)} and scale_b "
                          f"{tuple(scale_b.shape)}: a scale is one element or 2-D")
    # torch._scaled_mm's forms first; any other pair of shapes is taken as block scales, whose
    # shapes the C++ operator checks (and names, if they are not those either).
    scaled = shape_a == shape_b == (1, 1) or (shape_a == (m, 1) and shape_b == (1, n))
    function = "gemm_fp8_scaled" if scaled else "gemm_fp8_blockscale"
    key = (op, a.dtype, a.shape, n, shape_a, shape_b, _aligned(pa, pb, po))
    _launch(op, key, (a, b, scale_a, scale_b), function, po, pa, psa, *shape_a, pb, psb,
            *shape_b, m, n, k)


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


def _fp8_gemm_out(a, b, *scales):
    """bfloat16 [m, n] for a [m, k] and b [k, n]."""
    return [a.new_empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16)]


def _top_k(op, top_k):
    """top_k as an int, at least 1 (the C++ operator checks its upper bound)."""
    if int(top_k) < 1:
        raise BadArgument(f"kjit.ops.{op}: top_k is {top_k}, must be at least 1")
    return int(top_k)


def _positive(op, name, value):
    """value as an int, at least 1 (the C++ operator checks its upper bound)."""
    if int(value) < 1:
        raise BadArgument(f"kjit.ops.{op}: {name} is {value}, must be at least 1")
    return int(value)


def _align_out(ids, experts, block_m=128):
    """moe_align's outputs, int32: sorted_pairs [rows], block_experts [rows / block_m],
    pair_positions of ids' shape and totals [2], rows the bound kjit::ops::moe_align_rows gives."""
    rows = _align_rows(ids.numel(), experts, block_m)
    return [ids.new_empty((rows,), dtype=torch.int32),
            ids.new_empty((rows // block_m,), dtype=torch.int32),
            ids.new_empty(ids.shape, dtype=torch.int32), ids.new_empty((2,), dtype=torch.int32)]


def _routing_out(logits, top_k, *options):
    """weights float32 and ids int32, [tokens, top_k] each."""
    shape = (logits.shape[0], top_k)
    return [logits.new_empty(shape, dtype=torch.float32),
            logits.new_empty(shape, dtype=torch.int32)]


# name: (inputs' schema, outputs made from the inputs, implementation(outs..., inputs...))
_OPS = {
    "rms_norm": ("Tensor x, Tensor weight, float eps", _same, _rms_norm),
    "layer_norm": ("Tensor x, Tensor weight, Tensor bias, float eps", _same, _layer_norm),
    "softmax": ("Tensor x, float scale, int causal_queries", _same, _softmax),
    "quant_int8": ("Tensor x", _quant_out("int8"), _quant("int8")),
    "quant_fp8": ("Tensor x", _quant_out("fp8"), _quant("fp8")),
    "gemm": ("Tensor a, Tensor b", _matmul_out(False), _matmul("gemm", False)),
    "linear": ("Tensor a, Tensor b", _matmul_out(True), _matmul("linear", True)),
    "flash_attention": ("Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, "
                        "Tensor cu_seqlens_k, int max_seqlen_q, bool causal, float scale", _same,
                        _flash_attention),
    "topk_softmax": ("Tensor logits, int top_k, bool renormalize", _routing_out, _topk_softmax),
    "moe_topk": ("Tensor logits, int top_k, Tensor? bias, int scoring, int groups, "
                 "int top_groups, bool renormalize, float scale", _routing_out, _moe_topk),
    "moe_align": ("Tensor ids, int experts, int block_m=128", _align_out, _moe_align),
    # validate defaults to False in the schemas (calls without it stay valid) and in the
    # implementations (torch may hand a Python kernel no trailing argument left at its default).
    "fused_moe": ("Tensor x, Tensor weights, Tensor ids, Tensor w13, Tensor w2, "
                  "bool validate=False", _same, _fused_moe),
    "fused_moe_fp8": ("Tensor x, Tensor weights, Tensor ids, Tensor w13, Tensor w2, "
                      "Tensor w13_scales, Tensor w2_scales, bool validate=False", _same,
                      _fused_moe_fp8),
    "paged_attention_decode": ("Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, "
                               "Tensor seq_lens, float scale, int max_seq_len, float k_scale, "
                               "float v_scale, bool validate", _same, _paged_attention_decode),
    "gemm_fp8": ("Tensor a, Tensor b, Tensor scale_a, Tensor scale_b", _fp8_gemm_out, _gemm_fp8),
}
# The operators returning more than one tensor, and how many (the others return one).
_OUTPUT_COUNTS = {"quant_int8": 2, "quant_fp8": 2, "topk_softmax": 2, "moe_topk": 2,
                  "moe_align": 4}
for _name in _ACTIVATIONS:
    _OPS[_name] = ("Tensor x", _same, _activation(_name))
for _name in ("silu", "gelu", "gelu_tanh"):
    _OPS[_name + "_and_mul"] = ("Tensor x", _gated_out, _gated(_name))

# Each operator's tensor inputs: (position, name) from its schema.
_TENSOR_INPUTS = {name: [(i, part.split()[1]) for i, part in enumerate(schema.split(", "))
                         if part.startswith("Tensor ")] for name, (schema, _, _) in _OPS.items()}

# In place: (schema, implementation)
_INPLACE = {
    "fused_add_rms_norm": ("Tensor(a!) x, Tensor(b!) residual, Tensor weight, float eps",
                           _fused_add_rms_norm),
    "rotary_embedding": ("Tensor positions, Tensor(a!) query, Tensor(b!) key, "
                         "Tensor cos_sin_cache, int head_size, bool is_neox", _rotary_embedding),
    "reshape_and_cache": ("Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
                          "Tensor slot_mapping, float k_scale, float v_scale, Tensor? positions, "
                          "Tensor? cos_sin_cache, bool is_neox", _reshape_and_cache),
}


def _torch_version():
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


#: Whether the operators are torch operators (torch >= 2.4: torch.library.register_fake).
REGISTERED = _torch_version() >= (2, 4)


def _schemas():
    """Each torch operator's schema ("rms_norm(Tensor x, ...) -> Tensor"), in registration order:
    per operator of _OPS its functional form, then its _out form; then those of _INPLACE."""
    for name, (inputs, _, _) in _OPS.items():
        count = _OUTPUT_COUNTS.get(name, 1)
        returns = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
        yield f"{name}({inputs}) -> {returns}"
        mutable = ", ".join(f"Tensor({'abcd'[i]}!) out{i}" for i in range(count))
        yield f"{name}_out({mutable}, {inputs}) -> ()"
    for name, (schema, _) in _INPLACE.items():
        yield f"{name}({schema}) -> ()"


def _register():
    library = torch.library.Library("kjit", "FRAGMENT")
    for schema in _schemas():
        library.define(schema)
    for name, (inputs, make_outs, impl) in _OPS.items():

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
        library.impl(name, impl, "CUDA")
        torch.library.register_fake(f"kjit::{name}", lambda *args: None, lib=library)
    return library


_library = _register() if REGISTERED else None
# Whether torch.compile is tracing: then the operators go through torch.ops.kjit (dynamo reads
# this function as a constant); in eager mode they call their implementation directly, which keeps
# the dispatcher's several microseconds out of each call.
_compiling = torch.compiler.is_compiling if REGISTERED else (lambda: False)


def _call(name, inputs, out):
    """The operator `name` on `inputs`: through torch.ops.kjit while torch.compile traces, else
    the implementation directly (the dispatcher's cost stays out of eager calls)."""
    if _compiling():
        if out is None:
            return getattr(torch.ops.kjit, name)(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        getattr(torch.ops.kjit, name + "_out")(*outs, *inputs)
        return out
    _, make_outs, impl = _OPS[name]
    if type(out) is torch.Tensor:
        impl(out, *inputs)
        return out
    if out is None:
        try:
            outs = make_outs(*inputs)
        except (TypeError, AttributeError):  # a non-tensor input: say which
            for index, tensor_name in _TENSOR_INPUTS[name]:
                if not isinstance(inputs[index], torch.Tensor):
                    raise BadArgument(f"kjit.ops.{name}: {tensor_name} is a "
                                      f"{type(inputs[index]).__name__}, not a torch.Tensor"
                                      ) from None
            raise
    else:
        outs = list(out if isinstance(out, tuple) else (out,))
    impl(*outs, *inputs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _call_inplace(name, inputs):
    if _compiling():
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


def flash_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal=False, scale=None,
                    out=None):
    """flash_attn_varlen_func's prefill attention: q [total_q, q_heads, head_dim], k and v
    [total_k, kv_heads, head_dim] (GQA: q_heads a multiple of kv_heads), int32 cu_seqlens of
    batch + 1 entries; causal masks aligned to the bottom right; scale 1 / sqrt(head_dim) unless
    given. float16 and bfloat16, head_dim 64 or 128, NVIDIA sm_80 and newer."""
    if scale is None:
        known = isinstance(q, torch.Tensor) and q.dim() and q.shape[-1] > 0  # else refused below
        scale = q.shape[-1] ** -0.5 if known else 1.0
    return _call("flash_attention", (q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                                     bool(causal), float(scale)), out)


def topk_softmax(logits, top_k, renormalize=True, out=None):
    """vLLM's topk_softmax: (weights float32, ids int32), [tokens, top_k] each, the top_k
    experts of each row of logits [tokens, experts] by softmax, best first."""
    return _call("topk_softmax", (logits, _top_k("topk_softmax", top_k), bool(renormalize)), out)


def moe_topk(logits, top_k, bias=None, scoring="softmax", groups=1, top_groups=1,
             renormalize=True, scale=1.0, out=None):
    """topk_softmax with scoring "softmax" or "sigmoid", an optional float32 bias [experts] added
    for the choice only, grouped top-k (DeepSeek-V3: sigmoid, groups=8, top_groups=4) and a scale
    on the weights (routed_scaling_factor): kjit/ops/moe.hpp's moe_topk."""
    if scoring not in _SCORINGS:
        raise BadArgument(f"kjit.ops.moe_topk: scoring {scoring!r} is neither 'softmax' nor "
                          "'sigmoid'")
    return _call("moe_topk", (logits, _top_k("moe_topk", top_k), bias, _SCORINGS[scoring],
                              int(groups), int(top_groups), bool(renormalize), float(scale)), out)


def moe_align(ids, experts, block_m=128, out=None):
    """The token-expert pairs sorted by expert for a grouped GEMM of block_m-row tiles, as
    fused_moe sorts them (kjit/ops/moe.hpp's moe_align, on any GPU kjit runs on; vLLM's
    moe_align_block_size): pair p = token * top_k + slot of ids int32 [tokens, top_k] (any shape:
    its elements in order) routes to ids[p]. Returns int32 (sorted_pairs, block_experts,
    pair_positions, totals):
      sorted_pairs [rows]: each row's pair, -1 for padding; each expert's pairs in pair order (a
        stable sort by expert), its run padded to a multiple of block_m rows, experts without
        pairs taking none;
      block_experts [rows / block_m]: the expert of each tile of block_m rows;
      pair_positions (ids' shape): each pair's row; -1 for an id outside [0, experts), which the
        GPU cannot refuse: such a pair is routed nowhere;
      totals [2]: the tiles used, and the count of ids outside [0, experts).
    rows = (ceil(pairs / block_m) + min(experts, pairs)) * block_m, the most the alignment can
    take (so the outputs' sizes follow from the shapes alone, without reading ids); rows past
    totals[0] * block_m and tiles past totals[0] are not written. experts in [1, 256], block_m
    16, 32, 64 or 128."""
    return _call("moe_align", (ids, _positive("moe_align", "experts", experts),
                               _positive("moe_align", "block_m", block_m)), out)


def fused_moe(x, weights, ids, w13, w2, out=None, *, validate=False):
    """vLLM's fused_moe after routing: out [tokens, hidden] = sum over each token's top_k slots
    of weights * w2[e] @ (silu(gate) * up), [gate; up] = w13[e] @ x; x [tokens, hidden],
    weights float32 and ids int32 [tokens, top_k], w13 [experts, 2 * inter, hidden], w2
    [experts, hidden, inter]. float16 and bfloat16 on sm_90a (H100, H200: wgmma and TMA; one
    token takes a two-launch decode path) and on gfx942 and gfx950 (MI300, MI350: MFMA, proven
    on the CPU emulator and from its code objects, not yet run on an AMD GPU); on another GPU
    kjit.BadArgument naming those targets. The workspace is allocated here.

    An id of -1 routes its slot nowhere: the slot contributes zero (a token whose ids are all -1
    gets zeros). Any other id outside [0, experts) is the caller's error, which the GPU cannot
    raise: it is routed nowhere likewise, its slot contributing zero. validate=True raises
    kjit.BadArgument for it instead, one line naming the token and slot ("ids[4][1] is 8, outside
    [0, 8) ..."), before anything is launched (out is left as it was). It is off by default
    because it waits for the GPU and copies the ids to the host on every call (a device-to-host
    read), which a CUDA-graph capture does not allow (kjit.BadUsage there)."""
    return _call("fused_moe", (x, weights, ids, w13, w2, bool(validate)), out)


def fused_moe_fp8(x, weights, ids, w13, w2, w13_scales, w2_scales, out=None, *, validate=False):
    """fused_moe with e4m3fn expert weights (torch.float8_e4m3fn, or uint8 holding the bytes) and
    DeepSeek-V3's float32 block scales, one per 128 x 128 block of each expert's matrix: w13
    [experts, 2 * inter, hidden] with w13_scales [experts, 2 * inter / 128, hidden / 128], w2
    [experts, hidden, inter] with w2_scales [experts, hidden / 128, inter / 128]; weight
    (e, r, c) = w[e, r, c] * scales[e, r // 128, c // 128]. Each GEMM's activations are quantised
    to e4m3 per 1 x 128 block of a row on the way (vLLM's use_fp8_w8a8 with block_shape [128,
    128]). x float16 or bfloat16, hidden and inter multiples of 128, the e4m3 weights 16-byte
    aligned, on sm_90a only (no MFMA form yet); the workspace is allocated here. Ids and validate as
    fused_moe's: off by default (a device-to-host read, not allowed in a CUDA-graph capture); an
    id outside [0, experts) is then routed nowhere, its slot contributing zero."""
    return _call("fused_moe_fp8", (x, weights, ids, w13, w2, w13_scales, w2_scales,
                                   bool(validate)), out)


def paged_attention_decode(q, k_cache, v_cache, block_tables, seq_lens, scale=None, max_seq_len=0,
                           k_scale=1.0, v_scale=1.0, validate=False, out=None):
    """Decode attention over vLLM's and FlashInfer's paged NHD cache: q [batch, q_heads,
    head_dim]; k_cache and v_cache [num_blocks, page_size, kv_heads, head_dim] of q's dtype, or
    fp8 e4m3fn (torch.float8_e4m3fn, or uint8 holding the bytes) whose values are each times
    k_scale (v_scale); block_tables int32 [batch, max_blocks], seq_lens int32 [batch]; scale
    1 / sqrt(head_dim) unless given; max_seq_len the longest sequence (0: the tables' capacity).
    float16 and bfloat16, head_dim 64 or 128, page_size 16 or 32, any GQA ratio. A table entry
    past the cache or a length past the table gives that sequence NaN
    (kjit/ops/paged_attention.hpp); with validate=True it is kjit.BadArgument naming the entry
    instead (the tables are copied to the host first: it waits for the GPU, and cannot run in a
    CUDA-graph capture). The split-KV workspace is allocated here from torch's allocator."""
    if scale is None:
        known = isinstance(q, torch.Tensor) and q.dim() and q.shape[-1] > 0  # else refused below
        scale = q.shape[-1] ** -0.5 if known else 1.0
    return _call("paged_attention_decode", (q, k_cache, v_cache, block_tables, seq_lens,
                                            float(scale), int(max_seq_len), float(k_scale),
                                            float(v_scale), bool(validate)), out)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, k_scale=1.0, v_scale=1.0,
                      positions=None, cos_sin_cache=None, is_neox=True):
    """vLLM's reshape_and_cache_flash, in place on the caches: key and value [tokens, kv_heads,
    head_dim] (each token's rows contiguous, the tokens any stride apart: a slice of a fused qkv)
    go to the rows slot_mapping (int64 [tokens]; negative: skipped) names of key_cache and
    value_cache [num_blocks, page_size, kv_heads, head_dim], of key's dtype or fp8 (stored as
    e4m3 of x / k_scale, x / v_scale; the cache's dtype says which, as vLLM's kv_cache_dtype).
    With positions (int64 [tokens]) and cos_sin_cache ([max_position, rotary_dim] of key's dtype),
    RoPE is applied to the keys on the way, as rotary_embedding (is_neox) applies it."""
    _call_inplace("reshape_and_cache", (key, value, key_cache, value_cache, slot_mapping,
                                        float(k_scale), float(v_scale), positions, cos_sin_cache,
                                        bool(is_neox)))


def gemm_fp8(a, b, scale_a, scale_b, out=None):
    """torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16) on sm_90a, gfx942 and
    gfx950: a e4m3 [m, k] row-major, b e4m3 [k, n] column-major (weight.t() of a weight [n, k]),
    of the encoding kjit's GPU reads: torch.float8_e4m3fnuz on gfx942 (MI300), torch.float8_e4m3fn
    elsewhere (the other is kjit.BadArgument; uint8 holds the bytes of the one read), float32
    scales per tensor (one element each) or row-wise (scale_a [m, 1], scale_b [1, n]); any other
    scales are DeepSeek-V3's blocks, scale_a [m, k / 128] and scale_b [ceil(n / 128), k / 128]
    (per 128 x 128 block of the weight [n, k]). Returns bfloat16 [m, n]."""
    return _call("gemm_fp8", (a, b, scale_a, scale_b), out)


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
    # Operators whose inputs differ in type name each one's dtype ("dtypes").
    dtypes = [getattr(torch, d) for d in item.get("dtypes", [])] or [dtype] * len(item["shapes"])
    if name == "reshape_and_cache":  # key and value with the rows' strides and offsets named
        rows = [_zero_rows(shape, stride, offset, d, device) for shape, stride, offset, d in
                zip(item["shapes"], item["strides"], item["offsets"], dtypes)]
        rest = [_zeros(shape, d, device) for shape, d in zip(item["shapes"][2:], dtypes[2:])]
        k_scale, v_scale, is_neox = item["scalars"]
        rotation = rest[3:] or [None, None]
        _reshape_and_cache(*rows, *rest[:3], k_scale, v_scale, *rotation, is_neox)
        return
    inputs = [_zeros(shape, d, device) for shape, d in zip(item["shapes"], dtypes)]
    if name == "gemm_fp8":  # b is column-major: a weight [n, k] transposed
        inputs[1] = inputs[1].t().contiguous().t()
    if name in _INPLACE:
        _INPLACE[name][1](*inputs, item.get("eps", 1e-6))
        return
    scalars = {"rms_norm": [1e-6], "layer_norm": [1e-5], "softmax": [1.0, 0]}.get(name, [])
    if name == "moe_topk":  # its optional bias (a second tensor, or none) follows top_k
        top_k, *options = item["scalars"]
        inputs = [inputs[0], top_k, inputs[1] if len(inputs) > 1 else None, *options]
    else:
        inputs += item.get("scalars", scalars)
    make_outs, impl = _OPS[name][1], _OPS[name][2]
    impl(*make_outs(*inputs), *inputs)


def _zero_rows(shape, stride, offset, dtype, device):
    """Zeros [tokens, kv_heads, head_dim] whose tokens lie `stride` elements apart, starting
    `offset` elements into a fresh allocation (as reshape_and_cache's warm-up item names them)."""
    tokens, heads, dim = shape
    flat = torch.zeros(offset + max(tokens - 1, 0) * stride + heads * dim, dtype=dtype,
                       device=device)
    return flat.as_strided(shape, (stride, dim, 1), offset)


def _zeros(shape, dtype, device):
    """torch.zeros, of fp8 too (made as bytes: torch fills no float8 tensor on every release)."""
    if dtype in _GEMM_FP8_ENCODINGS:
        return torch.zeros(shape, dtype=torch.uint8, device=device).view(dtype)
    return torch.zeros(shape, dtype=dtype, device=device)
