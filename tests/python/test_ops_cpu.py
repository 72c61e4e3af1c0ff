"""kjit.ops' eager path without a GPU, where torch is installed (any version; Debian 12's
python3-torch is 1.13): each operator checks its tensors in Python, packs its call and reaches the
C++ operator through kjit_op_launch_packed (kjit._fastlaunch's C, or ctypes with
KJIT_PYTHON_FASTLAUNCH=0). The operators' device check is pointed at the CPU (get_device() -1),
so CPU tensors pass it; the C++ operator then reports a bad value that was packed (its own
check, which runs before it needs a GPU) or kjit.NoDevice. Skipped, with the reason, without
torch or where a GPU is present (test_gpu.py runs the operators there); the torch fakes' test needs
torch >= 2.4 instead, and runs with or without a GPU."""

import ctypes
import os
import struct

import pytest

import kjit

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")


@pytest.fixture
def ops(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: test_gpu.py runs kjit.ops on it")
    try:
        kjit.Runtime().default_device()
        pytest.skip("kjit found a GPU: CPU pointers must not reach its operators")
    except kjit.NoDevice:
        pass
    import kjit.ops as ops
    monkeypatch.setattr(ops, "_device", -1)
    return ops


def t(*shape, dtype=torch.bfloat16):
    return torch.ones(*shape, dtype=dtype)


def test_every_operator_reaches_the_c_operator(ops):
    x, w = t(3, 64), t(64)
    calls = [
        lambda: ops.rms_norm(x, w),
        lambda: ops.rms_norm(x, w, out=torch.empty_like(x)),
        lambda: ops.fused_add_rms_norm(x, t(3, 64), w),
        lambda: ops.layer_norm(x, w, t(64)),
        lambda: ops.softmax(x, 0.5),
        lambda: ops.silu(x), lambda: ops.gelu(x), lambda: ops.gelu_tanh(x),
        lambda: ops.relu(x), lambda: ops.sigmoid(x),
        lambda: ops.silu_and_mul(x), lambda: ops.gelu_and_mul(x),
        lambda: ops.gelu_tanh_and_mul(x),
        lambda: ops.rotary_embedding(torch.zeros(3, dtype=torch.int64), t(3, 4 * 16),
                                     t(3, 2 * 16), t(32, 16), 16),
        lambda: ops.quant_int8(x), lambda: ops.quant_fp8(x),
        lambda: ops.gemm(t(3, 64), t(64, 5)), lambda: ops.linear(t(3, 64), t(5, 64)),
    ]
    for call in calls:
        with pytest.raises(kjit.NoDevice):
            call()


def test_the_packed_values_reach_the_c_operator(ops):
    """The C++ operators' own checks name the values the Python side packed."""
    x, w = t(3, 64), t(64)
    with pytest.raises(kjit.BadArgument, match=r"kjit::ops::rms_norm: eps is -1"):
        ops.rms_norm(x, w, eps=-1.0, out=torch.empty_like(x))
    with pytest.raises(kjit.BadArgument, match=r"kjit::ops::layer_norm: eps is -2"):
        ops.layer_norm(x, w, t(64), eps=-2.0)
    with pytest.raises(kjit.BadArgument, match=r"kjit::ops::fused_add_rms_norm: eps is -3"):
        ops.fused_add_rms_norm(x, t(3, 64), w, eps=-3.0)


def test_bad_tensors_are_refused_before_the_c_operator(ops):
    x, w = t(3, 64), t(64)
    with pytest.raises(kjit.BadArgument, match=r"kjit.ops.rms_norm: weight is torch.float32"):
        ops.rms_norm(x, w.float())
    with pytest.raises(kjit.BadArgument, match=r"weight has shape \(32,\), expected \(64,\)"):
        ops.rms_norm(x, t(32))
    with pytest.raises(kjit.BadArgument, match="x is not contiguous"):
        ops.rms_norm(t(64, 3).t(), w)
    with pytest.raises(kjit.BadArgument, match="out has shape"):
        ops.rms_norm(x, w, out=t(2, 64))
    with pytest.raises(kjit.BadArgument, match="x is a list, not a torch.Tensor"):
        ops.silu([1.0])
    with pytest.raises(kjit.BadArgument, match="b is a tuple, not a torch.Tensor"):
        ops.gemm(t(3, 64), (64, 5))
    with pytest.raises(kjit.BadArgument, match="last dimension must be even"):
        ops.silu_and_mul(t(3, 7))
    with pytest.raises(kjit.BadArgument, match=r"x is torch.int32, expected one of"):
        ops.silu(t(4, dtype=torch.int32))


# ---- attention and mixture of experts ------------------------------------------------------


def attention_inputs(dtype=torch.bfloat16, head_dim=64):
    """Two sequences of 3 and 2 rows, 4 query heads over 2 kv heads."""
    q, kv = t(5, 4, head_dim, dtype=dtype), t(5, 2, head_dim, dtype=dtype)
    cu = torch.tensor([0, 3, 5], dtype=torch.int32)
    return q, kv, kv.clone(), cu, cu.clone()


def moe_inputs(dtype=torch.bfloat16, hidden=64, inter=32, experts=4, top_k=2):
    return (t(3, hidden, dtype=dtype), t(3, top_k, dtype=torch.float32),
            torch.zeros(3, top_k, dtype=torch.int32), t(experts, 2 * inter, hidden, dtype=dtype),
            t(experts, hidden, inter, dtype=dtype))


def test_attention_and_moe_reach_the_c_operator(ops):
    calls = [
        lambda: ops.flash_attention(*attention_inputs(), 3),
        lambda: ops.flash_attention(*attention_inputs(torch.float16), 3, causal=True, scale=0.1),
        lambda: ops.topk_softmax(t(3, 8), 2),
        lambda: ops.moe_topk(t(3, 8), 2, bias=t(8, dtype=torch.float32), scoring="sigmoid",
                             groups=4, top_groups=2),
        lambda: ops.fused_moe(*moe_inputs()),
    ]
    for call in calls:
        with pytest.raises(kjit.NoDevice):
            call()


def test_attention_and_moe_pack_their_values(ops):
    """Values only the C++ operators check reach them in the right slots."""
    q, k, v, cu_q, cu_k = attention_inputs(head_dim=32)
    with pytest.raises(kjit.BadArgument, match="head_dim 32 is not supported"):
        ops.flash_attention(q, k, v, cu_q, cu_k, 3)
    with pytest.raises(kjit.BadArgument, match="scale"):
        ops.flash_attention(*attention_inputs(), 3, scale=-1.0)
    with pytest.raises(kjit.BadArgument, match="kjit::ops::flash_attention"):  # no default scale
        ops.flash_attention(*attention_inputs(head_dim=0), 3)
    with pytest.raises(kjit.BadArgument, match="top_k"):
        ops.topk_softmax(t(3, 8), 9)
    with pytest.raises(kjit.BadArgument, match="groups"):
        ops.moe_topk(t(3, 8), 2, groups=3)
    with pytest.raises(kjit.BadArgument, match="hidden is 12, must be a positive multiple of 8"):
        ops.fused_moe(*moe_inputs(hidden=12))
    with pytest.raises(kjit.BadArgument, match="top_k"):
        ops.fused_moe(*moe_inputs(experts=2, top_k=3))


def test_attention_and_moe_refuse_bad_tensors_before_the_c_operator(ops):
    q, k, v, cu_q, cu_k = attention_inputs()
    with pytest.raises(kjit.BadArgument, match=r"flash_attention: q is torch.float32, expected "
                                               r"one of torch.float16, torch.bfloat16"):
        ops.flash_attention(q.float(), k, v, cu_q, cu_k, 3)
    with pytest.raises(kjit.BadArgument, match=r"q has shape \(5, 256\), expected \[total_q"):
        ops.flash_attention(q.reshape(5, 256), k, v, cu_q, cu_k, 3)
    with pytest.raises(kjit.BadArgument, match=r"k has shape \(5, 2, 32\), expected \(5, 2, 64\)"):
        ops.flash_attention(q, k[..., :32].contiguous(), v, cu_q, cu_k, 3)
    with pytest.raises(kjit.BadArgument, match=r"v has shape \(4, 2, 64\), expected \(5, 2, 64\)"):
        ops.flash_attention(q, k, v[:4], cu_q, cu_k, 3)
    with pytest.raises(kjit.BadArgument, match="cu_seqlens_q is torch.int64, expected torch.int32"):
        ops.flash_attention(q, k, v, cu_q.long(), cu_k, 3)
    with pytest.raises(kjit.BadArgument, match=r"cu_seqlens_k has shape \(2,\), expected \(3,\)"):
        ops.flash_attention(q, k, v, cu_q, cu_k[:2], 3)
    with pytest.raises(kjit.BadArgument, match="k is not contiguous"):
        ops.flash_attention(q, t(2, 5, 64, dtype=torch.bfloat16).transpose(0, 1), v, cu_q, cu_k, 3)
    with pytest.raises(kjit.BadArgument, match="out has shape"):
        ops.flash_attention(q, k, v, cu_q, cu_k, 3, out=k.clone())

    with pytest.raises(kjit.BadArgument, match="logits has shape"):
        ops.topk_softmax(t(8), 2)
    with pytest.raises(kjit.BadArgument, match="top_k is 0, must be at least 1"):
        ops.topk_softmax(t(3, 8), 0)
    with pytest.raises(kjit.BadArgument, match="ids is torch.int64, expected torch.int32"):
        ops.topk_softmax(t(3, 8), 2, out=(t(3, 2, dtype=torch.float32), t(3, 2, dtype=torch.int64)))
    with pytest.raises(kjit.BadArgument, match=r"bias has shape \(4,\), expected \(8,\)"):
        ops.moe_topk(t(3, 8), 2, bias=t(4, dtype=torch.float32))
    with pytest.raises(kjit.BadArgument, match="scoring 'tanh' is neither"):
        ops.moe_topk(t(3, 8), 2, scoring="tanh")

    x, weights, ids, w13, w2 = moe_inputs()
    with pytest.raises(kjit.BadArgument, match="fused_moe: x is torch.float32, expected one of"):
        ops.fused_moe(x.float(), weights, ids, w13, w2)
    with pytest.raises(kjit.BadArgument, match="ids is torch.int64, expected torch.int32"):
        ops.fused_moe(x, weights, ids.long(), w13, w2)
    with pytest.raises(kjit.BadArgument, match=r"weights has shape \(2, 2\), expected \(3, 2\)"):
        ops.fused_moe(x, weights[:2], ids, w13, w2)
    with pytest.raises(kjit.BadArgument,
                       match=r"w2 has shape \(4, 32, 64\), expected \(4, 64, 32\)"):
        ops.fused_moe(x, weights, ids, w13, w2.transpose(1, 2).contiguous())
    with pytest.raises(kjit.BadArgument, match=r"w13 has shape \(4, 64\), expected \[experts"):
        ops.fused_moe(x, weights, ids, w13[:, :, 0].contiguous(), w2)


def test_every_schema_parses(ops):
    """The schemas torch >= 2.4 registers are well formed, as any torch's parser reads them
    (torch 1.13's checks the syntax, not the type names)."""
    library = torch.library.Library("kjit_schema_check", "DEF")
    for schema in ops._schemas():
        library.define(schema)


# ---- paged attention, the KV-cache write and the FP8 GEMM ----------------------------------


def decode_inputs(dtype=torch.bfloat16, cache_dtype=None, head_dim=64, page=16, q_heads=4,
                  kv_heads=2, batch=2):
    """q [batch, q_heads, head_dim], a cache of 3 pages, tables of 2 pages a sequence."""
    cache = t(3, page, kv_heads, head_dim, dtype=cache_dtype or dtype)
    tables = torch.tensor([[2, 0], [1, 2]][:batch], dtype=torch.int32)
    lens = torch.tensor([17, 1][:batch], dtype=torch.int32)
    return t(batch, q_heads, head_dim, dtype=dtype), cache, cache.clone(), tables, lens


def cache_inputs(dtype=torch.bfloat16, cache_dtype=None, tokens=3, kv_heads=2, head_dim=64):
    """key and value [tokens, kv_heads, head_dim], a cache of 2 pages of 16, slots 5, -1, 20."""
    kv = t(tokens, kv_heads, head_dim, dtype=dtype)
    cache = t(2, 16, kv_heads, head_dim, dtype=cache_dtype or dtype)
    return kv, kv.clone(), cache, cache.clone(), torch.tensor([5, -1, 20][:tokens])


def fp8(*shape):
    return torch.zeros(*shape, dtype=torch.uint8)  # e4m3 bytes (torch 1.13 has no float8 type)


def gemm_fp8_inputs(m=4, n=16, k=256, scales="tensor"):
    """a [m, k], b [k, n] column-major (a weight [n, k] transposed) and float32 scales."""
    shapes = {"tensor": ((), (1, 1)), "row": ((m, 1), (1, n)),
              "block": ((m, k // 128), ((n + 127) // 128, k // 128))}[scales]
    return (fp8(m, k), fp8(n, k).t(), torch.ones(shapes[0]), torch.ones(shapes[1]))


def test_paged_attention_cache_write_and_fp8_gemm_reach_the_c_operator(ops):
    key, value, k_cache, v_cache, slots = cache_inputs()
    qkv = t(3, (4 + 2 + 2) * 64)  # vLLM's fused qkv: key and value are slices of its rows
    calls = [
        lambda: ops.paged_attention_decode(*decode_inputs()),
        lambda: ops.paged_attention_decode(*decode_inputs(torch.float16), scale=0.1,
                                           max_seq_len=20, out=t(2, 4, 64, dtype=torch.float16)),
        lambda: ops.paged_attention_decode(*decode_inputs(cache_dtype=torch.uint8), k_scale=0.5,
                                           v_scale=0.25),
        lambda: ops.paged_attention_decode(*decode_inputs(q_heads=8, kv_heads=1, page=32,
                                                          head_dim=128)),
        lambda: ops.paged_attention_decode(*decode_inputs(), validate=True),
        lambda: ops.reshape_and_cache(key, value, k_cache, v_cache, slots),
        lambda: ops.reshape_and_cache(key, value, fp8(2, 16, 2, 64), fp8(2, 16, 2, 64), slots,
                                      k_scale=0.5, v_scale=2.0),
        lambda: ops.reshape_and_cache(key, value, k_cache, v_cache, slots,
                                      positions=torch.zeros(3, dtype=torch.int64),
                                      cos_sin_cache=t(32, 64), is_neox=False),
        lambda: ops.reshape_and_cache(qkv[:, 256:384].view(3, 2, 64),
                                      qkv[:, 384:].view(3, 2, 64), k_cache, v_cache, slots),
        lambda: ops.gemm_fp8(*gemm_fp8_inputs()),
        lambda: ops.gemm_fp8(*gemm_fp8_inputs(scales="row")),
        lambda: ops.gemm_fp8(*gemm_fp8_inputs(scales="block"),
                             out=torch.empty(4, 16, dtype=torch.bfloat16)),
    ]
    for call in calls:
        with pytest.raises(kjit.NoDevice):
            call()


def test_paged_attention_cache_write_and_fp8_gemm_pack_their_values(ops):
    """Values only the C++ operators check reach them in the right slots: the decode's sizes, the
    write's head_dim, scales and rotary_dim, the GEMM's m, n, k and scale shapes (which also show
    the form chosen: torch._scaled_mm's, else block scales)."""
    with pytest.raises(kjit.BadArgument, match="head_dim 32 is not supported"):
        ops.paged_attention_decode(*decode_inputs(head_dim=32))
    with pytest.raises(kjit.BadArgument, match="page_size 24 is not supported"):
        ops.paged_attention_decode(*decode_inputs(page=24))
    with pytest.raises(kjit.BadArgument, match="q_heads 6 is not a multiple of kv_heads 4"):
        ops.paged_attention_decode(*decode_inputs(q_heads=6, kv_heads=4))
    with pytest.raises(kjit.BadArgument, match=r"max_seq_len 33 is past the tables' capacity"):
        ops.paged_attention_decode(*decode_inputs(), max_seq_len=33)
    with pytest.raises(kjit.BadArgument, match="kjit::ops::reshape_and_cache: head_dim 12"):
        ops.reshape_and_cache(*cache_inputs(head_dim=12))
    with pytest.raises(kjit.BadArgument, match="k_scale and v_scale must be positive"):
        ops.reshape_and_cache(*cache_inputs(cache_dtype=torch.uint8), v_scale=0.0)
    with pytest.raises(kjit.BadArgument, match=r"rotary_dim 66 must be even and in \[2, head_dim"):
        ops.reshape_and_cache(*cache_inputs(), positions=torch.zeros(3, dtype=torch.int64),
                              cos_sin_cache=t(8, 66))
    with pytest.raises(kjit.BadArgument, match="gemm_fp8_scaled: k = 24 is not a multiple of 16"):
        ops.gemm_fp8(*gemm_fp8_inputs(k=24))
    with pytest.raises(kjit.BadArgument, match="gemm_fp8_scaled: n = 12 is not a multiple of 8"):
        ops.gemm_fp8(*gemm_fp8_inputs(n=12, scales="row"))
    a, b, scale_a, _ = gemm_fp8_inputs(scales="block")
    with pytest.raises(kjit.BadArgument,
                       match=r"gemm_fp8_blockscale: scale_b is \[1, 3\], must be \[1, 2\]"):
        ops.gemm_fp8(a, b, scale_a, torch.ones(1, 3))
    with pytest.raises(kjit.BadArgument, match=r"k = 192 is not a multiple of 128 \(the scale"):
        ops.gemm_fp8(fp8(4, 192), fp8(16, 192).t(), torch.ones(4, 1), torch.ones(1, 1))


def test_paged_attention_cache_write_and_fp8_gemm_refuse_bad_tensors_before_the_c_operator(ops):
    q, k_cache, v_cache, tables, lens = decode_inputs()
    decode = ops.paged_attention_decode
    with pytest.raises(kjit.BadArgument, match=r"paged_attention_decode: q is torch.float32, "
                                               r"expected one of torch.float16, torch.bfloat16"):
        decode(q.float(), k_cache, v_cache, tables, lens)
    with pytest.raises(kjit.BadArgument, match=r"q has shape \(2, 256\), expected \[batch"):
        decode(q.reshape(2, 256), k_cache, v_cache, tables, lens)
    with pytest.raises(kjit.BadArgument, match=r"k_cache is torch.float16, expected one of "
                                               r"torch.bfloat16, torch.uint8"):
        decode(q, k_cache.half(), v_cache, tables, lens)
    with pytest.raises(kjit.BadArgument, match=r"k_cache has shape \(3, 16, 2, 32\), its last "
                                               r"dimensions must be \(64,\)"):
        decode(q, k_cache[..., :32].contiguous(), v_cache, tables, lens)
    with pytest.raises(kjit.BadArgument, match=r"k_cache has shape \(3, 16, 128\), expected "
                                               r"\[num_blocks"):
        decode(q, k_cache.reshape(3, 16, 128), v_cache, tables, lens)
    with pytest.raises(kjit.BadArgument, match="v_cache is torch.uint8, expected torch.bfloat16"):
        decode(q, k_cache, fp8(3, 16, 2, 64), tables, lens)
    with pytest.raises(kjit.BadArgument, match=r"v_cache has shape \(2, 16, 2, 64\), expected "
                                               r"\(3, 16, 2, 64\)"):
        decode(q, k_cache, v_cache[:2], tables, lens)
    with pytest.raises(kjit.BadArgument, match="block_tables is torch.int64, expected torch.int32"):
        decode(q, k_cache, v_cache, tables.long(), lens)
    with pytest.raises(kjit.BadArgument, match=r"block_tables has shape \(1, 2\), expected \(2,"):
        decode(q, k_cache, v_cache, tables[:1], lens)
    with pytest.raises(kjit.BadArgument, match="block_tables is not contiguous"):
        decode(q, k_cache, v_cache, tables.t().contiguous().t(), lens)
    with pytest.raises(kjit.BadArgument, match=r"seq_lens has shape \(1,\), expected \(2,\)"):
        decode(q, k_cache, v_cache, tables, lens[:1])
    with pytest.raises(kjit.BadArgument, match="out is torch.float16, expected torch.bfloat16"):
        decode(q, k_cache, v_cache, tables, lens, out=q.half())

    key, value, k_cache, v_cache, slots = cache_inputs()
    write = ops.reshape_and_cache
    with pytest.raises(kjit.BadArgument, match="reshape_and_cache: key is a list, not a torch"):
        write([1.0], value, k_cache, v_cache, slots)
    with pytest.raises(kjit.BadArgument, match=r"key has strides \(1, 3, 6\): each token's"):
        write(t(64, 2, 3).permute(2, 1, 0), value, k_cache, v_cache, slots)
    with pytest.raises(kjit.BadArgument, match=r"value has shape \(2, 2, 64\), expected \(3,"):
        write(key, value[:2], k_cache, v_cache, slots)
    with pytest.raises(kjit.BadArgument, match="value is torch.float16, expected torch.bfloat16"):
        write(key, value.half(), k_cache, v_cache, slots)
    with pytest.raises(kjit.BadArgument, match=r"key_cache has shape \(2, 16, 4, 32\), its last "
                                               r"dimensions must be \(2, 64\)"):
        write(key, value, t(2, 16, 4, 32), t(2, 16, 4, 32), slots)
    with pytest.raises(kjit.BadArgument, match="slot_mapping is torch.int32, expected torch.int64"):
        write(key, value, k_cache, v_cache, slots.int())
    with pytest.raises(kjit.BadArgument, match="positions and cos_sin_cache come together"):
        write(key, value, k_cache, v_cache, slots, positions=torch.zeros(3, dtype=torch.int64))
    with pytest.raises(kjit.BadArgument, match="cos_sin_cache is torch.float32, expected torch"):
        write(key, value, k_cache, v_cache, slots, positions=torch.zeros(3, dtype=torch.int64),
              cos_sin_cache=t(8, 64, dtype=torch.float32))

    a, b, scale_a, scale_b = gemm_fp8_inputs(scales="row")
    with pytest.raises(kjit.BadArgument, match=r"gemm_fp8: a is torch.bfloat16, expected one of "
                                               r"torch.uint8"):
        ops.gemm_fp8(t(4, 256), b, scale_a, scale_b)
    with pytest.raises(kjit.BadArgument, match="b is not column-major: pass weight.t()"):
        ops.gemm_fp8(a, b.contiguous(), scale_a, scale_b)
    with pytest.raises(kjit.BadArgument, match=r"b has shape \(128, 16\), expected \(256, n\)"):
        ops.gemm_fp8(a, fp8(16, 128).t(), scale_a, scale_b)
    with pytest.raises(kjit.BadArgument, match="scale_b is torch.float16, expected torch.float32"):
        ops.gemm_fp8(a, b, scale_a, scale_b.half())
    with pytest.raises(kjit.BadArgument, match=r"a scale is one element or 2-D"):
        ops.gemm_fp8(a, b, scale_a.reshape(4, 1, 1), scale_b)
    with pytest.raises(kjit.BadArgument, match=r"out has shape \(4, 8\), expected \(4, 16\)"):
        ops.gemm_fp8(a, b, scale_a, scale_b, out=t(4, 8))


def test_the_new_operators_make_their_outputs_from_shapes_alone(ops):
    """Each operator's outputs as its torch fake makes them (the functional form's allocation),
    from tensors without data (torch's meta device, on torch 1.13 too)."""
    def meta(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, dtype=dtype, device="meta")
    make_decode = ops._OPS["paged_attention_decode"][1]
    (out,) = make_decode(meta(5, 8, 128), meta(9, 16, 2, 128, dtype=torch.uint8),
                         meta(9, 16, 2, 128, dtype=torch.uint8), meta(5, 3, dtype=torch.int32),
                         meta(5, dtype=torch.int32), 0.1, 0, 1.0, 1.0, False)
    assert out.shape == (5, 8, 128) and out.dtype == torch.bfloat16
    make_gemm = ops._OPS["gemm_fp8"][1]
    (out,) = make_gemm(meta(7, 256, dtype=torch.uint8), meta(24, 256, dtype=torch.uint8).t(),
                       meta(7, 2, dtype=torch.float32), meta(1, 2, dtype=torch.float32))
    assert out.shape == (7, 24) and out.dtype == torch.bfloat16
    assert "reshape_and_cache" in ops._INPLACE and "reshape_and_cache" not in ops._OPS


# ---- mixture of experts with FP8 weights, the FP8 GEMM's encodings ---------------------------


def moe_fp8_inputs(dtype=torch.bfloat16, hidden=128, inter=128, experts=4, top_k=2):
    """x, weights, ids, e4m3 bytes w13 [experts, 2 * inter, hidden] and w2 [experts, hidden, inter],
    and their block scales [experts, 2 * inter / 128, hidden / 128], [experts, hidden / 128,
    inter / 128]."""
    x, weights, ids, _, _ = moe_inputs(dtype, hidden, inter, experts, top_k)
    return (x, weights, ids, fp8(experts, 2 * inter, hidden), fp8(experts, hidden, inter),
            torch.ones(experts, 2 * inter // 128, hidden // 128),
            torch.ones(experts, hidden // 128, inter // 128))


def test_fused_moe_fp8_reaches_the_c_operator(ops):
    """Every check passed, the workspace its own size function gives (the 16-bit layer's would
    be refused as too small): the C++ operator's last step, the device, is what fails."""
    for call in [lambda: ops.fused_moe_fp8(*moe_fp8_inputs()),
                 lambda: ops.fused_moe_fp8(*moe_fp8_inputs(torch.float16, hidden=256, inter=384,
                                                           experts=8, top_k=3)),
                 lambda: ops.fused_moe_fp8(*moe_fp8_inputs(), out=t(3, 128))]:
        with pytest.raises(kjit.NoDevice):
            call()


def test_fused_moe_fp8_packs_its_values(ops):
    """The sizes, and each scale tensor's shape in its own slots, reach the C++ checks."""
    with pytest.raises(kjit.BadArgument,
                       match=r"hidden is 192, must be a positive multiple of 128 \(the scale"):
        ops.fused_moe_fp8(*moe_fp8_inputs(hidden=192))
    with pytest.raises(kjit.BadArgument, match=r"inter is 192, must be a positive multiple of 128"):
        ops.fused_moe_fp8(*moe_fp8_inputs(inter=192))
    with pytest.raises(kjit.BadArgument, match="top_k"):
        ops.fused_moe_fp8(*moe_fp8_inputs(experts=2, top_k=3))
    x, weights, ids, w13, w2, w13_scales, w2_scales = moe_fp8_inputs()
    with pytest.raises(kjit.BadArgument, match=r"w13_scales is \[4, 1, 1\], must be \[4, 2, 1\]"):
        ops.fused_moe_fp8(x, weights, ids, w13, w2, torch.ones(4, 1, 1), w2_scales)
    with pytest.raises(kjit.BadArgument, match=r"w2_scales is \[3, 1, 1\], must be \[4, 1, 1\]"):
        ops.fused_moe_fp8(x, weights, ids, w13, w2, w13_scales, torch.ones(3, 1, 1))


def test_fused_moe_fp8_refuses_bad_tensors_before_the_c_operator(ops):
    x, weights, ids, w13, w2, w13_scales, w2_scales = moe_fp8_inputs()
    moe = ops.fused_moe_fp8
    with pytest.raises(kjit.BadArgument, match="fused_moe_fp8: x is torch.float32, expected one"):
        moe(x.float(), weights, ids, w13, w2, w13_scales, w2_scales)
    with pytest.raises(kjit.BadArgument, match=r"w13 is torch.bfloat16, expected one of "
                                               r"torch.uint8"):
        moe(x, weights, ids, t(4, 256, 128), w2, w13_scales, w2_scales)
    with pytest.raises(kjit.BadArgument, match="w2 is torch.int8, expected torch.uint8"):
        moe(x, weights, ids, w13, w2.to(torch.int8), w13_scales, w2_scales)
    with pytest.raises(kjit.BadArgument,
                       match=r"w2 has shape \(4, 128, 64\), expected \(4, 128, 128\)"):
        moe(x, weights, ids, w13, fp8(4, 128, 64), w13_scales, w2_scales)
    with pytest.raises(kjit.BadArgument, match="ids is torch.int64, expected torch.int32"):
        moe(x, weights, ids.long(), w13, w2, w13_scales, w2_scales)
    with pytest.raises(kjit.BadArgument, match="w13_scales is torch.float16, expected torch.float"):
        moe(x, weights, ids, w13, w2, w13_scales.half(), w2_scales)
    with pytest.raises(kjit.BadArgument, match=r"w2_scales has shape \(4, 1\), expected "
                                               r"\[experts, hidden / 128, inter / 128\]"):
        moe(x, weights, ids, w13, w2, w13_scales, w2_scales[..., 0])
    with pytest.raises(kjit.BadArgument, match="w13_scales is not contiguous"):
        moe(x, weights, ids, w13, w2, torch.ones(2, 4, 1).transpose(0, 1), w2_scales)
    with pytest.raises(kjit.BadArgument, match="w2_scales is a float, not a torch.Tensor"):
        moe(x, weights, ids, w13, w2, w13_scales, 1.0)
    with pytest.raises(kjit.BadArgument, match="out is torch.float16, expected torch.bfloat16"):
        moe(x, weights, ids, w13, w2, w13_scales, w2_scales, out=x.half())
    # e4m3 weights given to the 16-bit layer: the error names the operator that takes them.
    with pytest.raises(kjit.BadArgument, match=r"fused_moe: w13 is torch.uint8, expected "
                                               r"torch.bfloat16: e4m3 weights with block scales "
                                               r"are kjit.ops.fused_moe_fp8's"):
        ops.fused_moe(x, weights, ids, w13, w2)


def test_gemm_fp8_takes_uint8_as_the_gpus_bytes_without_asking_their_encoding(ops, monkeypatch):
    """uint8 operands are bytes of whichever encoding the GPU reads: gemm_fp8 does not ask it
    (kjit_gemm_fp8_encoding, which needs the GPU) for them. Asking it here reaches the C ABI."""
    with pytest.raises(kjit.NoDevice):
        ops._gemm_fp8_encoding()

    def refuse():
        raise AssertionError("gemm_fp8 asked the encoding for uint8 operands")
    monkeypatch.setattr(ops, "_gemm_fp8_encoding", refuse)
    with pytest.raises(kjit.NoDevice):
        ops.gemm_fp8(*gemm_fp8_inputs())


@pytest.mark.parametrize("stand_ins", [False, True])
def test_gemm_fp8_takes_the_fp8_dtype_of_the_encoding_the_gpu_reads(ops, monkeypatch, stand_ins):
    """e4m3fnuz where the GPU reads it (gfx942), e4m3fn elsewhere; the other is refused by name
    before the C++ operator (the same bytes would be read as other values). With stand_ins,
    int8 and bool take the fp8 dtypes' places in gemm_fp8's table: the same checks on a torch
    without float8 (Debian's 1.13)."""
    if stand_ins:
        fn, fnuz = torch.int8, torch.bool
        monkeypatch.setattr(ops, "_GEMM_FP8_ENCODINGS", {torch.uint8: None, fn: 0, fnuz: 1})
        monkeypatch.setattr(ops, "_ENCODING_DTYPES", (str(fn), str(fnuz)))
    else:
        fn, fnuz = getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e4m3fnuz", None)
        if fnuz is None:
            pytest.skip(f"torch {torch.__version__} has no float8_e4m3fnuz")
    a, b, scale_a, scale_b = gemm_fp8_inputs(scales="row")
    for encoding, read, other in ((0, fn, fnuz), (1, fnuz, fn)):
        monkeypatch.setattr(ops, "_gemm_encoding", encoding)
        with pytest.raises(kjit.NoDevice):
            ops.gemm_fp8(a.view(read), b.view(read), scale_a, scale_b)
        with pytest.raises(kjit.BadArgument, match=rf"gemm_fp8: a is {other}, but kjit's GPU "
                                                   rf"\(cuda:-1\) reads {read}: convert a and b"):
            ops.gemm_fp8(a.view(other), b.view(other), scale_a, scale_b)
        with pytest.raises(kjit.BadArgument, match=rf"gemm_fp8: b is {other}, expected {read}"):
            ops.gemm_fp8(a.view(read), b.view(other), scale_a, scale_b)


def test_the_fp8_layer_makes_its_output_from_shapes_alone(ops):
    def meta(*shape, dtype=torch.uint8):
        return torch.empty(*shape, dtype=dtype, device="meta")
    (out,) = ops._OPS["fused_moe_fp8"][1](
        meta(5, 256, dtype=torch.float16), meta(5, 2, dtype=torch.float32),
        meta(5, 2, dtype=torch.int32), meta(8, 768, 256), meta(8, 256, 384),
        meta(8, 6, 2, dtype=torch.float32), meta(8, 2, 3, dtype=torch.float32))
    assert out.shape == (5, 256) and out.dtype == torch.float16


@pytest.fixture
def registered_ops():
    """kjit.ops with its torch operators registered, GPU or not: fake tensors never reach a device,
    so this runs where torch is new enough, which is the GPU machine (the `ops` fixture skips
    there)."""
    import kjit.ops as ops
    if not ops.REGISTERED:
        pytest.skip(f"torch {torch.__version__} is older than 2.4: kjit.ops registers no torch "
                    "operators (torch.library.register_fake)")
    return ops


def test_the_fakes_of_the_new_operators_give_shapes_without_the_library(registered_ops,
                                                                          monkeypatch):
    ops = registered_ops
    from torch._subclasses.fake_tensor import FakeTensorMode

    def refuse(*args):
        raise AssertionError("a fake implementation reached kjit's library")
    monkeypatch.setattr(ops, "lib", refuse)
    moe_layer = moe_fp8_inputs(torch.float16)
    with FakeTensorMode() as mode:
        q, k_cache, v_cache, tables, lens = (mode.from_tensor(x) for x in decode_inputs())
        out = torch.ops.kjit.paged_attention_decode(q, k_cache, v_cache, tables, lens, 0.125, 0,
                                                    1.0, 1.0, False)
        assert out.shape == q.shape and out.dtype == q.dtype
        key, value, k_cache, v_cache, slots = (mode.from_tensor(x) for x in cache_inputs())
        torch.ops.kjit.reshape_and_cache(key, value, k_cache, v_cache, slots, 1.0, 1.0, None, None,
                                         True)
        a, b, scale_a, scale_b = (mode.from_tensor(x) for x in gemm_fp8_inputs(scales="block"))
        out = torch.ops.kjit.gemm_fp8(a, b, scale_a, scale_b)
        assert out.shape == (4, 16) and out.dtype == torch.bfloat16
        moe = [mode.from_tensor(x) for x in moe_layer]
        out = torch.ops.kjit.fused_moe_fp8(*moe)
        assert out.shape == (3, 128) and out.dtype == torch.float16


# ---- moe_align and fused_moe's validate (C ABI 1.5) -----------------------------------------


def align_ids(tokens=3, top_k=2):
    return torch.zeros(tokens, top_k, dtype=torch.int32)


def test_moe_align_reaches_the_c_operator(ops):
    rows = (1 + 6) * 128  # 6 pairs: one tile, plus one more for each expert that may hold some
    calls = [
        lambda: ops.moe_align(align_ids(), 8),
        lambda: ops.moe_align(align_ids().flatten(), 256, block_m=16),
        lambda: ops.moe_align(align_ids(), 8, out=(torch.empty(rows, dtype=torch.int32),
                                                   torch.empty(7, dtype=torch.int32),
                                                   torch.empty(3, 2, dtype=torch.int32),
                                                   torch.empty(2, dtype=torch.int32))),
    ]
    for call in calls:
        with pytest.raises(kjit.NoDevice):
            call()


def test_moe_align_packs_its_values(ops):
    """experts and block_m reach the C++ checks of their upper bounds in their slots."""
    with pytest.raises(kjit.BadArgument,
                       match=r"kjit::ops::moe_align: block_m is 100, not 16, 32, 64 or 128"):
        ops.moe_align(align_ids(), 8, block_m=100)
    with pytest.raises(kjit.BadArgument,
                       match=r"kjit::ops::moe_align: experts is 257, must be in \[1, 256\]"):
        ops.moe_align(align_ids(), 257)


def test_moe_align_refuses_bad_tensors_before_the_c_operator(ops):
    with pytest.raises(kjit.BadArgument, match="ids is torch.int64, expected torch.int32"):
        ops.moe_align(align_ids().long(), 8)
    with pytest.raises(kjit.BadArgument, match="moe_align: ids is a list, not a torch.Tensor"):
        ops.moe_align([0, 1], 8)
    with pytest.raises(kjit.BadArgument, match="moe_align: experts is 0, must be at least 1"):
        ops.moe_align(align_ids(), 0)
    with pytest.raises(kjit.BadArgument, match="moe_align: block_m is 0, must be at least 1"):
        ops.moe_align(align_ids(), 8, block_m=0)
    ids = align_ids()
    good = [t.clone() for t in ops._OPS["moe_align"][1](ids, 8, 64)]
    for index, name, replacement, words in [
            (0, "sorted_pairs", torch.empty(64, dtype=torch.int32), r"has shape \(64,\), expected "
                                                                    r"\(448,\)"),
            (1, "block_experts", torch.empty(7, dtype=torch.int64), "is torch.int64"),
            (2, "pair_positions", torch.empty(6, dtype=torch.int32), r"has shape \(6,\), expected "
                                                                     r"\(3, 2\)"),
            (3, "totals", torch.empty(3, dtype=torch.int32), r"has shape \(3,\), expected \(2,\)")]:
        out = list(good)
        out[index] = replacement
        with pytest.raises(kjit.BadArgument, match=rf"moe_align: {name} {words}"):
            ops.moe_align(ids, 8, block_m=64, out=tuple(out))


def test_moe_align_of_no_pairs_uses_no_tile_and_calls_nothing(ops, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("moe_align of no pairs reached the C operator")
    monkeypatch.setattr(ops, "_launch", refuse)
    sorted_pairs, block_experts, positions, totals = ops.moe_align(align_ids(0, 6), 8)
    assert sorted_pairs.shape == (0,) and block_experts.shape == (0,)
    assert positions.shape == (0, 6) and totals.tolist() == [0, 0]


def test_moe_align_sizes_its_outputs_as_the_library_bounds_them():
    """The rows the Python side allocates (from the shapes alone, as the torch fake must) are
    kjit_moe_align_rows' (kjit::ops::moe_align_rows), which the library also refuses to give for
    sizes moe_align refuses."""
    import kjit.ops as ops
    native = kjit._native.lib()
    rows = ctypes.c_size_t()
    for pairs in (0, 1, 2, 5, 16, 17, 127, 128, 129, 300, 4999, 24576):
        for experts in (1, 3, 8, 64, 256):
            for block_m in (16, 32, 64, 128):
                kjit._native.check(native.moe_align_rows(pairs, experts, block_m,
                                                         ctypes.byref(rows)))
                assert ops._align_rows(pairs, experts, block_m) == rows.value, (pairs, experts,
                                                                                block_m)
    rows.value = 5
    with pytest.raises(kjit.BadArgument, match="moe_align_rows: pairs 8, experts 8, block_m 100"):
        kjit._native.check(native.moe_align_rows(8, 8, 100, ctypes.byref(rows)))
    assert rows.value == 0


def test_moe_align_makes_its_outputs_from_shapes_alone(ops):
    """moe_align's outputs as its torch fake makes them, from ids without data (the meta
    device): every size follows from ids' shape, experts and block_m."""
    ids = torch.empty(37, 6, dtype=torch.int32, device="meta")
    sorted_pairs, block_experts, positions, totals = ops._OPS["moe_align"][1](ids, 64, 16)
    rows = (-(-222 // 16) + 64) * 16
    assert sorted_pairs.shape == (rows,) and block_experts.shape == (rows // 16,)
    assert positions.shape == (37, 6) and totals.shape == (2,)
    assert {t.dtype for t in (sorted_pairs, block_experts, positions, totals)} == {torch.int32}
    (default_rows,) = ops._OPS["moe_align"][1](ids, 8)[0].shape  # block_m's default, fused_moe's
    assert default_rows == (-(-222 // 128) + 8) * 128


class RecordingLibrary:
    """kjit's library with kjit_op_launch_packed replaced by tests/python/fake_launch.c's
    recorder (the C path, kjit._fastlaunch) and the C operator `function` by a Python recorder
    (the ctypes path): what the operator hands the C ABI, on whichever path this run takes."""

    def __init__(self, real, function, slots):
        self._real, self.asked = real, []
        fake = ctypes.CDLL(os.environ["KJIT_TEST_FAKE_LAUNCH"])
        fake.kjit_test_launch_recorded.restype = ctypes.c_void_p
        fake.kjit_test_launch_reset(ctypes.c_size_t(40 + 8 * slots))
        self._fake, self._size, self.ctypes_calls = fake, 40 + 8 * slots, []
        self.op_launch_packed = fake.kjit_test_launch
        self.op_launch_packed.restype = ctypes.c_int
        self.op_launch_packed.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        setattr(self, function, lambda *args: self.ctypes_calls.append(args[1:-1]) or 0)

    def op_get(self, runtime, name, handle):
        self.asked.append(name.decode())
        handle._obj.value = 0x1234
        return 0

    def __getattr__(self, name):
        return getattr(self._real, name)

    def slots(self, codes):
        """Each call's arguments between the runtime and the stream, by their kjit_op_launch_packed
        slots (each in the low bytes of its 8) or as the ctypes call got them."""
        calls = list(self.ctypes_calls)
        formats = ["<" + code.replace("P", "Q") for code in codes]
        for i in range(self._fake.kjit_test_launch_count()):
            block = ctypes.string_at(self._fake.kjit_test_launch_recorded(i), self._size)
            calls.append(tuple(struct.unpack_from(format_, block, 40 + 8 * j)[0]
                               for j, format_ in enumerate(formats)))
        return calls


def recording(ops, monkeypatch, function):
    """ops' C operator `function` recorded (RecordingLibrary) instead of called, and its codes."""
    if "KJIT_TEST_FAKE_LAUNCH" not in os.environ:
        pytest.skip("KJIT_TEST_FAKE_LAUNCH is not set (ctest sets it to fake_launch.c's library)")
    codes = [ops._CODES[t] for t in kjit._native._SIGNATURES["kjit_" + function][1][1:-1]]
    library = RecordingLibrary(kjit._native.lib(), function, len(codes))
    monkeypatch.setattr(ops, "lib", lambda: library)
    monkeypatch.setattr(ops, "_operators", {})
    return library, codes


@pytest.mark.parametrize("form", ["fused_moe", "fused_moe_fp8"])
def test_validate_reaches_the_c_operator_in_its_slot(ops, monkeypatch, form):
    """validate=True is the _ex function's validate, 1, in the slot before the stream (and 0
    without it), on the launch path this run takes; tests/capi proves the C ABI reads it there."""
    function = form + "_ex"
    library, codes = recording(ops, monkeypatch, function)
    inputs = moe_inputs() if form == "fused_moe" else moe_fp8_inputs()
    call = getattr(ops, form)
    call(*inputs)
    call(*inputs, validate=True)
    call(*inputs, out=torch.empty_like(inputs[0]), validate=1)
    assert library.asked == [function]
    calls = library.slots(codes)
    assert len(calls) == 3 and [c[-1] for c in calls] == [0, 1, 1]
    assert all(len(c) == len(codes) and c[5:7] == (3, 2) for c in calls)  # tokens, top_k


def test_moe_align_reaches_the_c_operator_in_its_slots(ops, monkeypatch):
    library, codes = recording(ops, monkeypatch, "moe_align")
    ids = align_ids(5, 3)
    outputs = ops.moe_align(ids, 64, block_m=32)
    (call,) = library.slots(codes)
    assert library.asked == ["moe_align"]
    assert call == (*(t.data_ptr() for t in outputs), ids.data_ptr(), 15, 64, 32)
