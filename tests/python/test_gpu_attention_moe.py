"""kjit.ops.flash_attention, topk_softmax, moe_topk and fused_moe on a GPU with torch >= 2.4
(tools/gpu-check --run-python), each against a torch reference in float64 (no TF32 setting can
reach it; fp32 for the routing, which has no products) written out one sequence, head or token
at a time from the same rounded inputs, into outputs poisoned with NaN. Skipped,
with the reason, elsewhere (flash_attention needs NVIDIA sm_80 or newer, fused_moe sm_90a)."""

import ast

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 4):
    pytest.skip(f"torch {torch.__version__} is older than 2.4", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import kjit  # noqa: E402
import kjit.ops as ops  # noqa: E402

DEVICE = "cuda"
HALF_DTYPES = [torch.float16, torch.bfloat16]


def capability():
    return torch.cuda.get_device_capability() if torch.version.hip is None else (0, 0)


def require_capability(least, why):
    if capability() < least:
        pytest.skip(f"{why}; this GPU is {torch.cuda.get_device_name()} "
                    f"(capability {capability()})")


def randn(*shape, dtype):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32).to(dtype)


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)


def assert_within(actual, expected, bound):
    """|actual - expected| <= bound element-wise (bound a tensor or a number); NaN fails."""
    error = (actual.double() - expected).abs()
    bad = ~(error <= bound)
    assert not bad.any(), (f"{int(bad.sum())} of {error.numel()} elements outside the bound; "
                           f"the largest error {error.nan_to_num(float('inf')).max().item()}")


# ---- flash_attention ------------------------------------------------------------------------


def reference_attention(q, k, v, cu_q, cu_k, causal, scale):
    """float64: per sequence and head, softmax(scale * q k^T) v, the causal mask aligned to the
    bottom right (row i of n sees keys j <= i + m - n of m); a row that sees no key is 0."""
    q, k, v = q.double(), k.double(), v.double()
    out = torch.zeros_like(q)
    group = q.shape[1] // k.shape[1]
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        n, m = q1 - q0, k1 - k0
        for h in range(q.shape[1]):
            scores = scale * q[q0:q1, h] @ k[k0:k1, h // group].T
            if causal:
                i = torch.arange(n, device=DEVICE)[:, None]
                j = torch.arange(m, device=DEVICE)[None, :]
                scores = scores.masked_fill(j > i + m - n, float("-inf"))
            p = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # all masked: NaN, made 0
            out[q0:q1, h] = p @ v[k0:k1, h // group]
    return out


def offsets(lengths):
    cu = [0]
    for length in lengths:
        cu.append(cu[-1] + length)
    return cu


# (query lengths, key lengths, q_heads, kv_heads): ragged lengths, none a multiple of the tiles
ATTENTION_CASES = [
    ([1, 17, 130, 64], [1, 17, 130, 64], 8, 2),  # prefill, GQA 4:1
    ([100, 1, 33], [300, 77, 33], 4, 4),  # more keys than queries: chunked prefill, MHA
    ([40, 5], [10, 3], 4, 1),  # causal: rows that see no key (zeros); MQA
]


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_lengths, k_lengths, q_heads, kv_heads", ATTENTION_CASES)
def test_flash_attention_against_torch(dtype, head_dim, causal, q_lengths, k_lengths, q_heads,
                                       kv_heads):
    require_capability((8, 0), "flash_attention runs on NVIDIA sm_80 and newer")
    torch.manual_seed(0)
    cu_q, cu_k = offsets(q_lengths), offsets(k_lengths)
    q = randn(cu_q[-1], q_heads, head_dim, dtype=dtype)
    k = randn(cu_k[-1], kv_heads, head_dim, dtype=dtype)
    v = (torch.rand(cu_k[-1], kv_heads, head_dim, device=DEVICE) * 2 - 1).to(dtype)  # |v| <= 1
    scale = head_dim ** -0.5
    cu_q_device = torch.tensor(cu_q, dtype=torch.int32, device=DEVICE)
    cu_k_device = torch.tensor(cu_k, dtype=torch.int32, device=DEVICE)
    out = poisoned(q.shape, dtype)
    assert ops.flash_attention(q, k, v, cu_q_device, cu_k_device, max(q_lengths), causal=causal,
                               out=out) is out
    expected = reference_attention(q, k, v, cu_q, cu_k, causal, scale)
    # The kernel rounds P to dtype before P v (|v| <= 1: at most eps / 2 absolute) and the
    # output once (eps / 2 relative): the C++ test's bound eps + eps * |out|, doubled for room.
    eps = torch.finfo(dtype).eps
    assert_within(out, expected, 2 * (eps + eps * expected.abs()))
    # The functional form and the default scale give the same.
    again = ops.flash_attention(q, k, v, cu_q_device, cu_k_device, max(q_lengths), causal)
    assert torch.equal(again, out)


# ---- routing ----------------------------------------------------------------------------------


def distinct_logits(tokens, experts, dtype):
    """Each row a permutation of 0, 1/8, ..., (experts - 1) / 8 (exact in every dtype): no ties,
    so the top-k order is unique."""
    order = torch.rand(tokens, experts, device=DEVICE).argsort(dim=1)
    return (order.float() / 8).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, *HALF_DTYPES])
@pytest.mark.parametrize("renormalize", [False, True])
def test_topk_softmax_against_torch(dtype, renormalize):
    torch.manual_seed(0)
    tokens, experts, top_k = 37, 64, 6
    logits = distinct_logits(tokens, experts, dtype)
    weights = poisoned((tokens, top_k), torch.float32)
    ids = torch.full((tokens, top_k), -7, dtype=torch.int32, device=DEVICE)
    result = ops.topk_softmax(logits, top_k, renormalize, out=(weights, ids))
    assert result[0] is weights and result[1] is ids
    expected_weights, expected_ids = torch.softmax(logits.float(), dim=-1).topk(top_k, dim=-1)
    if renormalize:
        expected_weights = expected_weights / expected_weights.sum(-1, keepdim=True)
    assert torch.equal(ids, expected_ids.int())
    assert_within(weights, expected_weights, 1e-5)


def test_moe_topk_grouped_sigmoid_against_torch():
    """DeepSeek-V3's routing: sigmoid scores, a bias for the choice only, 8 groups of which the
    4 with the best two-expert sums are searched, renormalised, scaled by 2.5."""
    torch.manual_seed(0)
    tokens, experts, top_k, groups, top_groups, scale = 37, 64, 6, 8, 4, 2.5
    logits = randn(tokens, experts, dtype=torch.bfloat16)
    bias = torch.randn(experts, device=DEVICE) * 0.1
    weights, ids = ops.moe_topk(logits, top_k, bias=bias, scoring="sigmoid", groups=groups,
                                top_groups=top_groups, renormalize=True, scale=scale)
    scores = torch.sigmoid(logits.float())
    choice = scores + bias
    group_scores = choice.view(tokens, groups, -1).topk(2, dim=-1).values.sum(-1)
    chosen_groups = group_scores.topk(top_groups, dim=-1).indices
    allowed = torch.zeros(tokens, groups, dtype=torch.bool, device=DEVICE)
    allowed.scatter_(1, chosen_groups, True)
    allowed = allowed.repeat_interleave(experts // groups, dim=1)
    expected_ids = choice.masked_fill(~allowed, float("-inf")).topk(top_k, dim=-1).indices
    expected_weights = scores.gather(1, expected_ids)
    expected_weights = expected_weights / expected_weights.sum(-1, keepdim=True) * scale
    assert torch.equal(ids, expected_ids.int())
    assert_within(weights, expected_weights, 1e-5 * scale)


# ---- fused_moe --------------------------------------------------------------------------------


def reference_moe(x, weights, ids, w13, w2):
    """float64, one token and slot at a time: the gated intermediate and each expert's output
    rounded to x's dtype as fused_moe rounds them; ids outside [0, experts) add nothing. Also
    the scale of its roundings, sum |weight| * (|w2[e]| @ |gated|), as the C++ test's."""
    dtype, experts, inter = x.dtype, w13.shape[0], w13.shape[1] // 2
    out = torch.zeros(x.shape, dtype=torch.float64, device=DEVICE)
    magnitude = torch.zeros(x.shape, dtype=torch.float64, device=DEVICE)
    for t in range(x.shape[0]):
        for s in range(ids.shape[1]):
            e = int(ids[t, s])
            if not 0 <= e < experts:
                continue
            gate_up = w13[e].double() @ x[t].double()
            gated = torch.nn.functional.silu(gate_up[:inter]) * gate_up[inter:]
            gated = gated.to(dtype).double()
            expert = (w2[e].double() @ gated).to(dtype).double()
            out[t] += weights[t, s].double() * expert
            magnitude[t] += weights[t, s].double().abs() * (w2[e].double().abs() @ gated.abs())
    return out, magnitude


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("tokens", [1, 37])
def test_fused_moe_against_torch(dtype, tokens):
    require_capability((9, 0), "fused_moe runs on sm_90a (H100, H200) only")
    torch.manual_seed(0)
    experts, hidden, inter, top_k = 8, 256, 384, 2
    x = randn(tokens, hidden, dtype=dtype)
    w13 = (randn(experts, 2 * inter, hidden, dtype=torch.float32) / hidden ** 0.5).to(dtype)
    w2 = (randn(experts, hidden, inter, dtype=torch.float32) / inter ** 0.5).to(dtype)
    ids = torch.rand(tokens, experts, device=DEVICE).argsort(dim=1)[:, :top_k].int().contiguous()
    weights = torch.rand(tokens, top_k, device=DEVICE)
    if tokens > 1:
        ids[-1] = -1  # a token routed nowhere gets zeros
    out = poisoned(x.shape, dtype)
    assert ops.fused_moe(x, weights, ids, w13, w2, out=out) is out
    expected, magnitude = reference_moe(x, weights, ids, w13, w2)
    # The gated intermediate and each expert's output round to dtype (half a unit each, relative
    # to the magnitude), the sum once more: the C++ test's bound.
    eps = torch.finfo(dtype).eps
    assert_within(out, expected, 2 * eps * magnitude + eps * expected.abs())
    assert_within(ops.fused_moe(x, weights, ids, w13, w2), expected,
                  2 * eps * magnitude + eps * expected.abs())


# ---- torch operators ----------------------------------------------------------------------


def test_the_fakes_give_shapes_without_the_library(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    def refuse(*args):
        raise AssertionError("a fake implementation reached kjit's library")
    q = randn(5, 4, 64, dtype=torch.bfloat16)
    kv = randn(7, 2, 64, dtype=torch.bfloat16)
    cu = torch.tensor([0, 5], dtype=torch.int32, device=DEVICE)
    logits = randn(3, 8, dtype=torch.bfloat16)
    x, w13, w2 = (randn(3, 64, dtype=torch.bfloat16), randn(4, 64, 64, dtype=torch.bfloat16),
                  randn(4, 64, 32, dtype=torch.bfloat16))
    with FakeTensorMode() as mode, monkeypatch.context() as patch:
        patch.setattr(ops, "lib", refuse)
        patch.setattr(kjit._core, "default_runtime", refuse)
        fq, fkv, fcu, flogits = (mode.from_tensor(t) for t in (q, kv, cu, logits))
        out = torch.ops.kjit.flash_attention(fq, fkv, fkv, fcu, fcu, 5, True, 0.125)
        assert out.shape == q.shape and out.dtype == q.dtype
        weights, ids = torch.ops.kjit.moe_topk(flogits, 2, None, 1, 1, 1, True, 1.0)
        assert weights.shape == ids.shape == (3, 2)
        assert weights.dtype == torch.float32 and ids.dtype == torch.int32
        weights, ids = torch.ops.kjit.topk_softmax(flogits, 2, True)
        assert ids.dtype == torch.int32
        fx, fw13, fw2 = (mode.from_tensor(t) for t in (x, w13, w2))
        assert torch.ops.kjit.fused_moe(fx, weights, ids, fw13, fw2).shape == x.shape


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def capture(call):
    """call() captured in a CUDA graph on a side stream: (the graph, what call returned)."""
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            result = call()
    torch.cuda.current_stream().wait_stream(stream)
    return graph, result


def warmup_item_named_by_a_capture(call):
    """The kjit.warmup item that the BadUsage of capturing call() before any warm-up names."""
    with pytest.raises(kjit.BadUsage) as raised:
        capture(call)
    message = raised.value.message
    start = message.index("kjit.warmup([") + len("kjit.warmup([")
    return ast.literal_eval(message[start:message.rindex("])")])


def test_capture_after_the_warmup_its_error_names():
    """A shape not run in the process is refused in a capture; warming up the item the error
    names lets the same call be captured, and the replay computes what eager calls do."""
    torch.manual_seed(0)
    logits = randn(5, 64, dtype=torch.bfloat16)
    bias = torch.randn(64, device=DEVICE)

    def route():
        return ops.moe_topk(logits, 6, bias=bias, scoring="sigmoid", groups=8, top_groups=4,
                            scale=2.5)
    calls = [route]
    if capability() >= (8, 0):
        q = randn(9, 4, 64, dtype=torch.bfloat16)
        k, v = randn(11, 2, 64, dtype=torch.bfloat16), randn(11, 2, 64, dtype=torch.bfloat16)
        cu_q = torch.tensor([0, 4, 9], dtype=torch.int32, device=DEVICE)
        cu_k = torch.tensor([0, 5, 11], dtype=torch.int32, device=DEVICE)
        calls.append(lambda: ops.flash_attention(q, k, v, cu_q, cu_k, 5, causal=True))
    for call in calls:
        item = warmup_item_named_by_a_capture(call)
        torch.cuda.synchronize()
        kjit.warmup([item])
        graph, captured = capture(call)
        graph.replay()
        torch.cuda.synchronize()
        eager = call()
        for got, expected in zip(as_tuple(captured), as_tuple(eager)):
            assert torch.equal(got, expected), item["op"]
