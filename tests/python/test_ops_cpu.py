"""kjit.ops' eager path without a GPU, where torch is installed (any version; Debian 12's
python3-torch is 1.13): each operator checks its tensors in Python, packs its call and reaches the
C++ operator through kjit_op_launch_packed (kjit._fastlaunch's C, or ctypes with
KJIT_PYTHON_FASTLAUNCH=0). The operators' device check is pointed at the CPU (get_device() -1),
so CPU tensors pass it; the C++ operator then reports a bad value that was packed (its own
check, which runs before it needs a GPU) or kjit.NoDevice. Skipped, with the reason, without
torch or where a GPU is present (test_gpu.py runs the operators there)."""

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
