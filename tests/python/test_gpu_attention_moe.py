"""kjit.ops.flash_attention, topk_softmax, moe_topk, moe_align, fused_moe, fused_moe_fp8,
paged_attention_decode, reshape_and_cache and gemm_fp8 on a GPU with torch >= 2.4
(tools/gpu-check --run-python), each against a torch reference in float64 (no TF32 setting can
reach it; fp32 for the routing, which has no products; moe_align's integers exactly) written out
one sequence, head or token at a time from the same rounded inputs, into outputs poisoned with
NaN. Skipped, with the reason, elsewhere (flash_attention needs NVIDIA sm_80 or newer, fused_moe,
fused_moe_fp8 and gemm_fp8 sm_90a; the fp8 cases torch's float8_e4m3fn)."""

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


# ---- moe_align --------------------------------------------------------------------------------


def reference_align(ids, experts, block_m):
    """moe_align in torch: the pairs (ids' elements in order) sorted by expert, stably; each
    expert's run padded with -1 to a multiple of block_m rows, experts without pairs taking none;
    the expert of each tile; each pair's row, -1 for an id outside [0, experts) (routed nowhere);
    the tiles and the ids out of range. int32 tensors on the CPU."""
    flat = ids.flatten().long().cpu()
    valid = (flat >= 0) & (flat < experts)
    key = torch.where(valid, flat, torch.full_like(flat, experts))  # out of range: sorted last
    order = torch.sort(key, stable=True).indices
    counts = torch.bincount(key, minlength=experts + 1)
    sorted_pairs, block_experts = [], []
    positions = torch.full_like(flat, -1)
    taken = 0
    for e in range(experts):
        run = order[taken:taken + int(counts[e])]
        taken += len(run)
        if len(run) == 0:
            continue
        positions[run] = torch.arange(len(sorted_pairs), len(sorted_pairs) + len(run))
        sorted_pairs += run.tolist() + [-1] * (-len(run) % block_m)
        block_experts += [e] * -(-len(run) // block_m)
    totals = [len(block_experts), int((~valid).sum())]
    return (torch.tensor(sorted_pairs, dtype=torch.int32),
            torch.tensor(block_experts, dtype=torch.int32),
            positions.int().view(ids.shape), torch.tensor(totals, dtype=torch.int32))


def drawn_ids(tokens, top_k, weights):
    """ids int32 [tokens, top_k] drawn with replacement from experts of the given weights (an
    expert of weight 0 receives no pair)."""
    probabilities = torch.tensor(weights, dtype=torch.float64)
    return torch.multinomial(probabilities, tokens * top_k, replacement=True).int().view(
        tokens, top_k)


def out_of_range(ids, experts):
    """ids with every 7th pair made -1, experts, -2 or 1000 in turn: routed nowhere."""
    flat = ids.clone().flatten()
    bad = torch.tensor([-1, experts, -2, 1000], dtype=torch.int32)
    flat[::7] = bad[torch.arange(len(flat[::7])) % 4]
    return flat.view(ids.shape)


RAGGED = [30, 10, 0, 5, 1, 0, 3, 51, 0, 0, 0, 7, 2, 0, 0, 40]  # 16 experts, 7 of them empty
# (what, experts, block_m, ids on the CPU): the C++ GPU test's cases, from Python
ALIGN_CASES = [
    ("ragged counts, empty experts", 16, 16, lambda: drawn_ids(1000, 5, RAGGED)),
    ("fine-grained, 4096 tokens", 64, 128, lambda: drawn_ids(4096, 6, [1.0] * 64)),
    ("Mixtral-like, ragged", 8, 64, lambda: drawn_ids(1111, 2, [9, 1, 0, 4, 4, 0, 2, 30])),
    ("one expert takes every pair", 64, 128, lambda: torch.full((833, 6), 63, dtype=torch.int32)),
    ("ids out of range", 64, 64, lambda: out_of_range(drawn_ids(500, 6, [1.0] * 64), 64)),
    ("three pairs, 256 experts", 256, 128, lambda: torch.tensor([[255, 0, 255]],
                                                                 dtype=torch.int32)),
    ("one token", 8, 32, lambda: torch.tensor([[3, 5]], dtype=torch.int32)),
]


@pytest.mark.parametrize("what, experts, block_m, make_ids", ALIGN_CASES,
                         ids=[case[0] for case in ALIGN_CASES])
def test_moe_align_matches_the_reference_exactly(what, experts, block_m, make_ids):
    """moe_align on the GPU (any vendor kjit runs on) against reference_align, every integer
    exactly, into outputs poisoned with -7: the rows and tiles past totals[0] keep the poison
    (they are not written); the functional form's outputs agree where written."""
    torch.manual_seed(0)
    ids = make_ids().to(DEVICE)
    expected = reference_align(ids, experts, block_m)
    rows = (-(-ids.numel() // block_m) + min(experts, ids.numel())) * block_m
    out = tuple(torch.full(shape, -7, dtype=torch.int32, device=DEVICE)
                for shape in ((rows,), (rows // block_m,), ids.shape, (2,)))
    result = ops.moe_align(ids, experts, block_m=block_m, out=out)
    assert all(got is given for got, given in zip(result, out))
    sorted_pairs, block_experts, positions, totals = (t.cpu() for t in out)
    tiles = int(expected[3][0])
    assert torch.equal(totals, expected[3])
    assert torch.equal(sorted_pairs[:tiles * block_m], expected[0])
    assert torch.equal(block_experts[:tiles], expected[1])
    assert torch.equal(positions, expected[2])
    assert (sorted_pairs[tiles * block_m:] == -7).all() and (block_experts[tiles:] == -7).all()
    functional = [t.cpu() for t in ops.moe_align(ids, experts, block_m)]
    assert [tuple(t.shape) for t in functional] == [tuple(t.shape) for t in out]
    assert torch.equal(functional[0][:tiles * block_m], expected[0])
    assert torch.equal(functional[1][:tiles], expected[1])
    assert torch.equal(functional[2], expected[2]) and torch.equal(functional[3], expected[3])


def test_moe_align_sorts_what_fused_moe_multiplies():
    """The alignment of the default block (128 rows, fused_moe's tile) puts each pair in a tile
    of its own expert, every row of a tile either padding or a pair of that expert."""
    torch.manual_seed(1)
    ids = drawn_ids(300, 4, RAGGED[:8]).to(DEVICE)
    sorted_pairs, block_experts, positions, totals = ops.moe_align(ids, 8)
    tiles = int(totals[0])
    rows = sorted_pairs[:tiles * 128].view(tiles, 128).long()
    real = rows >= 0
    experts_of_rows = ids.flatten().long()[rows.clamp(min=0)]
    tile_experts = block_experts[:tiles, None].long().expand_as(rows)
    assert torch.equal(experts_of_rows[real], tile_experts[real])
    assert torch.equal(sorted_pairs[positions.flatten().long()].long(),
                       torch.arange(ids.numel(), device=DEVICE))


# ---- fused_moe's validate ---------------------------------------------------------------------


def validate_case(form):
    """(call(ids, out=None, validate=False), tokens, top_k, experts, the slot made bad, reference of
    ids) for the 16-bit layer (8 experts, top 2: the C++ test's ids[4][1]) or the FP8 layer (top
    3: its ids[5][2]); 16 tokens, so the grouped path (no decode) sorts the pairs."""
    torch.manual_seed(0)
    tokens, experts, hidden, inter = 16, 8, 256, 384
    x = randn(tokens, hidden, dtype=torch.bfloat16)
    if form == "bfloat16":
        top_k, slot = 2, (4, 1)
        w13 = (randn(experts, 2 * inter, hidden, dtype=torch.float32) / hidden ** 0.5).bfloat16()
        w2 = (randn(experts, hidden, inter, dtype=torch.float32) / inter ** 0.5).bfloat16()
        ids = torch.rand(tokens, experts, device=DEVICE).argsort(dim=1)[:, :top_k].int()
        weights = torch.rand(tokens, top_k, device=DEVICE)

        def call(ids, out=None, validate=False):
            return ops.fused_moe(x, weights, ids, w13, w2, out=out, validate=validate)

        def reference(ids):
            return reference_moe(x, weights, ids, w13, w2)
    else:
        if FP8 is None:
            pytest.skip(f"torch {torch.__version__} has no float8_e4m3fn")
        top_k, slot = 3, (5, 2)
        w13, w13_scales, w13_values = quantized_experts(experts, 2 * inter, hidden)
        w2, w2_scales, w2_values = quantized_experts(experts, hidden, inter)
        ids, weights = moe_fp8_routing("random", tokens, top_k, experts)

        def call(ids, out=None, validate=False):
            return ops.fused_moe_fp8(x, weights, ids, w13, w2, w13_scales, w2_scales, out=out,
                                     validate=validate)

        def reference(ids):
            return reference_moe_fp8(x, weights, ids, w13_values, w2_values)
    return call, reference, ids.contiguous(), experts, slot


@pytest.mark.parametrize("form", ["bfloat16", "fp8"])
@pytest.mark.parametrize("bad", ["experts", -2, 1000])
def test_fused_moe_validate_names_an_id_out_of_range_and_launches_nothing(form, bad):
    """validate=True: an id of `experts`, -2 or 1000 is kjit.BadArgument with the C++ operator's
    one line naming its token and slot, before anything is launched (a poisoned output stays
    poisoned). Without validate that id is routed nowhere: the output is the one with -1 in its
    place, bit for bit (the same alignment), and the reference's with that slot adding nothing."""
    require_capability((9, 0), "fused_moe and fused_moe_fp8 run on sm_90a (H100, H200)")
    call, reference, ids, experts, (token, slot) = validate_case(form)
    bad = experts if bad == "experts" else bad
    ids[token, slot] = bad
    out = poisoned((ids.shape[0], 256), torch.bfloat16)
    with pytest.raises(kjit.BadArgument) as raised:
        call(ids, out=out, validate=True)
    assert raised.value.message == (f"kjit::ops::fused_moe: ids[{token}][{slot}] is {bad}, outside "
                                    f"[0, {experts}) (-1 routes a slot nowhere)")
    assert str(raised.value) == raised.value.message and "\n" not in str(raised.value)
    torch.cuda.synchronize()
    assert out.isnan().all(), "fused_moe wrote its output before refusing the ids"
    unvalidated = call(ids)
    ids[token, slot] = -1
    validated = call(ids, validate=True)  # -1 passes the validation
    assert torch.equal(unvalidated, validated)
    expected, magnitude = reference(ids)
    eps = torch.finfo(torch.bfloat16).eps
    bound = (2 * eps + (2 ** -4 if form == "fp8" else 0)) * magnitude + eps * expected.abs()
    assert_within(validated, expected, bound)


def test_fused_moe_validate_is_refused_in_a_cuda_graph_capture():
    """validate=True waits for the GPU and reads the ids back: inside a capture it is kjit.BadUsage
    saying so, before anything is checked or launched."""
    x = randn(4, 64, dtype=torch.bfloat16)
    weights, ids = torch.rand(4, 2, device=DEVICE), torch.zeros(4, 2, dtype=torch.int32,
                                                                 device=DEVICE)
    w13, w2 = randn(4, 64, 64, dtype=torch.bfloat16), randn(4, 64, 32, dtype=torch.bfloat16)
    with pytest.raises(kjit.BadUsage, match=r"kjit.ops.fused_moe: validate=True waits for the GPU "
                                            r"and copies the ids to the host, which a CUDA-graph "
                                            r"capture does not allow"):
        capture(lambda: ops.fused_moe(x, weights, ids, w13, w2, validate=True))
    scales = torch.ones(4, 1, 1, device=DEVICE)
    with pytest.raises(kjit.BadUsage, match=r"kjit.ops.fused_moe_fp8: validate=True"):
        capture(lambda: ops.fused_moe_fp8(x, weights, ids, w13.to(torch.uint8), w2.to(torch.uint8),
                                          scales, scales, validate=True))


# ---- misaligned FP8 pointers ------------------------------------------------------------------


def misaligned(t, by):
    """t's bytes (a 1-byte dtype) copied into fresh memory `by` bytes past a 16-byte boundary
    (torch's allocator aligns every block to far more), with t's shape and strides' order."""
    flat = t.contiguous().flatten()
    buffer = torch.empty(flat.numel() + 16, dtype=t.dtype, device=DEVICE)
    assert buffer.data_ptr() % 16 == 0
    view = buffer[by:by + flat.numel()]
    view.copy_(flat)
    assert view.data_ptr() % 16 == by
    return view.view(t.shape)


def assert_one_line_bad_argument(call, message):
    with pytest.raises(kjit.BadArgument) as raised:
        call()
    assert raised.value.message == message and raised.value.detail == ""
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("by", [1, 4, 8])
def test_misaligned_fp8_pointers_are_one_line_bad_arguments(by):
    """A view of e4m3 bytes `by` bytes past 16-byte alignment (TMA's and the 16-byte loads'):
    gemm_fp8's a in the block-scale form and b in the scaled form, fused_moe_fp8's w13 and w2,
    each kjit.BadArgument of one line naming it, from the C++ checks that run before the
    device's target is asked (on any GPU)."""
    torch.manual_seed(0)
    m, n, k = 64, 256, 512
    a = torch.randint(0, 0x7E, (m, k), dtype=torch.uint8, device=DEVICE)  # bytes of the GPU's
    w = torch.randint(0, 0x7E, (n, k), dtype=torch.uint8, device=DEVICE)  # encoding
    block_a, block_b = torch.ones(m, k // 128, device=DEVICE), torch.ones(2, k // 128,
                                                                         device=DEVICE)
    assert_one_line_bad_argument(lambda: ops.gemm_fp8(misaligned(a, by), w.t(), block_a, block_b),
                                 "kjit::ops::gemm_fp8_blockscale: a is not 16-byte aligned")
    row_a, row_b = torch.ones(m, 1, device=DEVICE), torch.ones(1, n, device=DEVICE)
    assert_one_line_bad_argument(lambda: ops.gemm_fp8(a, misaligned(w, by).t(), row_a, row_b),
                                 "kjit::ops::gemm_fp8_scaled: b is not 16-byte aligned")
    tokens, experts, hidden, inter, top_k = 4, 4, 128, 128, 2
    x = randn(tokens, hidden, dtype=torch.bfloat16)
    weights = torch.rand(tokens, top_k, device=DEVICE)
    ids = torch.zeros(tokens, top_k, dtype=torch.int32, device=DEVICE)
    w13 = torch.randint(0, 0x7E, (experts, 2 * inter, hidden), dtype=torch.uint8, device=DEVICE)
    w2 = torch.randint(0, 0x7E, (experts, hidden, inter), dtype=torch.uint8, device=DEVICE)
    w13_scales = torch.ones(experts, 2 * inter // 128, hidden // 128, device=DEVICE)
    w2_scales = torch.ones(experts, hidden // 128, inter // 128, device=DEVICE)
    assert_one_line_bad_argument(
        lambda: ops.fused_moe_fp8(x, weights, ids, misaligned(w13, by), w2, w13_scales, w2_scales),
        "kjit::ops::fused_moe: w13 is not 16-byte aligned")
    assert_one_line_bad_argument(
        lambda: ops.fused_moe_fp8(x, weights, ids, w13, misaligned(w2, by), w13_scales, w2_scales),
        "kjit::ops::fused_moe: w2 is not 16-byte aligned")


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
    fp8_layer = (w13.to(torch.uint8), w2.to(torch.uint8), torch.ones(4, 1, 1, device=DEVICE))
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
        assert torch.ops.kjit.fused_moe(fx, weights, ids, fw13, fw2, True).shape == x.shape
        fp8_w13, fp8_w2, scales = (mode.from_tensor(t) for t in fp8_layer)
        assert torch.ops.kjit.fused_moe_fp8(fx, weights, ids, fp8_w13, fp8_w2, scales,
                                            scales).shape == x.shape
        assert torch.ops.kjit.fused_moe_fp8(fx, weights, ids, fp8_w13, fp8_w2, scales, scales,
                                            True).shape == x.shape
        sorted_pairs, blocks, positions, totals = torch.ops.kjit.moe_align(ids, 8, 16)
        assert sorted_pairs.shape == ((1 + 6) * 16,) and blocks.shape == (7,)
        assert positions.shape == ids.shape and totals.shape == (2,)
        assert torch.ops.kjit.moe_align(ids, 8)[0].shape == ((1 + 6) * 128,)  # block_m 128


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
    ids = out_of_range(drawn_ids(29, 6, [1.0] * 64), 64).to(DEVICE)
    # moe_align: what it writes whatever the ids (rows past its tiles keep what they held)
    calls = [route, lambda: ops.moe_align(ids, 64, block_m=64)[2:]]
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


# ---- paged decode, the KV-cache write, the FP8 GEMM -------------------------------------------

FP8 = getattr(torch, "float8_e4m3fn", None)


def to_fp8(x, scale):
    """The e4m3fn bytes of x / scale (torch's rounding to nearest even) and the values they hold
    times the scale, in float64."""
    stored = (x.float() / scale).to(FP8)
    return stored, stored.double() * scale


def paged_tables(lengths, page, spare=3):
    """Block tables that give each sequence ceil(length / page) pages in a shuffled order, their
    unused entries past the cache (never read), and the number of pages in all (plus `spare`
    pages no sequence owns)."""
    needed = [-(-length // page) for length in lengths]
    num_blocks = sum(needed) + spare
    order = torch.randperm(num_blocks).tolist()
    max_blocks = max(needed) + 1
    tables = torch.full((len(lengths), max_blocks), 1 << 30, dtype=torch.int32)
    for s, count in enumerate(needed):
        tables[s, :count] = torch.tensor(order[:count], dtype=torch.int32)
        order = order[count:]
    return tables.to(DEVICE), num_blocks


def reference_decode(q, k_values, v_values, tables, lengths, scale):
    """float64, one sequence and head at a time: softmax(scale * q K^T) V over the sequence's
    tokens, gathered from the pages its table names (k_values, v_values: what the caches hold)."""
    batch, q_heads, head_dim = q.shape
    page, kv_heads = k_values.shape[1], k_values.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64, device=DEVICE)
    for s, length in enumerate(lengths):
        pages = tables[s, :-(-length // page)].long()
        keys = k_values[pages].reshape(-1, kv_heads, head_dim)[:length]
        values = v_values[pages].reshape(-1, kv_heads, head_dim)[:length]
        for h in range(q_heads):
            g = h // (q_heads // kv_heads)
            p = torch.softmax(scale * keys[:, g] @ q[s, h].double(), dim=0)
            out[s, h] = p @ values[:, g]
    return out


# (lengths, q_heads, kv_heads, head_dim, page): ragged lengths with 1 and non-multiples of the
# page, GQA ratios 1, 4 and 8 (MQA among them), and one long sequence alone (split over the
# context: flash-decoding's workspace).
DECODE_CASES = [
    ([1, 17, 200, 33, 64], 8, 8, 128, 16),
    ([5, 1, 300], 16, 4, 64, 32),
    ([129, 1, 47, 16], 8, 1, 128, 16),
    ([3000], 32, 4, 128, 16),
]


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("kv", ["model", "fp8", "fp8 bytes"])
@pytest.mark.parametrize("lengths, q_heads, kv_heads, head_dim, page", DECODE_CASES)
def test_paged_attention_decode_against_torch(dtype, kv, lengths, q_heads, kv_heads, head_dim,
                                              page):
    if kv != "model" and FP8 is None:
        pytest.skip(f"torch {torch.__version__} has no float8_e4m3fn")
    torch.manual_seed(0)
    tables, num_blocks = paged_tables(lengths, page)
    shape = (num_blocks, page, kv_heads, head_dim)
    k = (torch.rand(shape, device=DEVICE) * 2 - 1).to(dtype)
    v = (torch.rand(shape, device=DEVICE) * 2 - 1).to(dtype)
    k_scale, v_scale = 0.01, 0.003  # |x / scale| <= 334: inside e4m3's 448
    if kv == "model":
        k_cache, v_cache, k_values, v_values = k, v, k.double(), v.double()
        largest = 1.0
    else:
        k_cache, k_values = to_fp8(k, k_scale)
        v_cache, v_values = to_fp8(v, v_scale)
        largest = v_values.abs().max().item()
        if kv == "fp8 bytes":  # the same cache as uint8, as torch without float8 holds it
            k_cache, v_cache = k_cache.view(torch.uint8), v_cache.view(torch.uint8)
    q = (torch.rand(len(lengths), q_heads, head_dim, device=DEVICE) * 2 - 1).to(dtype)
    lens = torch.tensor(lengths, dtype=torch.int32, device=DEVICE)
    out = poisoned(q.shape, dtype)
    assert ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, k_scale=k_scale,
                                      v_scale=v_scale, out=out) is out
    expected = reference_decode(q, k_values, v_values, tables, lengths, head_dim ** -0.5)
    # The C++ test's bound: computed in float (well under 2^-12 of the largest value), then one
    # rounding to dtype.
    eps = torch.finfo(dtype).eps
    assert_within(out, expected, largest * 2 ** -12 + eps * expected.abs())
    again = ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, k_scale=k_scale,
                                       v_scale=v_scale, max_seq_len=max(lengths))
    assert_within(again, expected, largest * 2 ** -12 + eps * expected.abs())


def test_a_split_paged_decode_captured_in_a_cuda_graph_matches_the_reference():
    """A decode split over the context (its merge a programmatic dependent launch on sm_90, behind
    the split kernel's tail) captured in a CUDA graph after its warm-up: replays with new queries
    in the captured buffer, each into a poisoned output, match the float64 reference."""
    torch.manual_seed(0)
    lengths, page, q_heads, kv_heads, head_dim = [20011, 3], 16, 32, 8, 128
    tables, num_blocks = paged_tables(lengths, page)
    shape = (num_blocks, page, kv_heads, head_dim)
    k_cache = (torch.rand(shape, device=DEVICE) * 2 - 1).to(torch.bfloat16)
    v_cache = (torch.rand(shape, device=DEVICE) * 2 - 1).to(torch.bfloat16)
    lens = torch.tensor(lengths, dtype=torch.int32, device=DEVICE)
    q = torch.empty(len(lengths), q_heads, head_dim, device=DEVICE, dtype=torch.bfloat16)
    out = torch.empty_like(q)

    def call():
        return ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, out=out)
    item = warmup_item_named_by_a_capture(call)
    torch.cuda.synchronize()
    kjit.warmup([item])
    graph, _ = capture(call)
    eps = torch.finfo(torch.bfloat16).eps
    for replay in range(2):
        q.copy_(torch.rand(q.shape, device=DEVICE) * 2 - 1)
        out.copy_(poisoned(q.shape, torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        expected = reference_decode(q, k_cache.double(), v_cache.double(), tables, lengths,
                                    head_dim ** -0.5)
        assert_within(out, expected, 2 ** -12 + eps * expected.abs())


def test_paged_attention_decode_bad_tables_give_nan_or_the_error_naming_them():
    """A table entry past the cache and a length past the table: NaN for those sequences alone,
    never a read outside the cache; with validate=True, kjit.BadArgument naming the entry."""
    torch.manual_seed(0)
    lengths, page, q_heads, kv_heads, head_dim = [40, 40, 40], 16, 8, 2, 128
    tables, num_blocks = paged_tables(lengths, page)
    good_page = int(tables[1, 2])
    tables[1, 2] = num_blocks + 5  # sequence 1: its third page is past the cache
    shape = (num_blocks, page, kv_heads, head_dim)
    k_cache, v_cache = randn(*shape, dtype=torch.bfloat16), randn(*shape, dtype=torch.bfloat16)
    q = randn(3, q_heads, head_dim, dtype=torch.bfloat16)
    capacity = tables.shape[1] * page
    lens = torch.tensor([40, 40, capacity + 1], dtype=torch.int32, device=DEVICE)  # 2: too long
    out = ops.paged_attention_decode(q, k_cache, v_cache, tables, lens)
    torch.cuda.synchronize()
    assert out[1:].isnan().all()
    expected = reference_decode(q[:1], k_cache.double(), v_cache.double(), tables[:1], [40],
                                head_dim ** -0.5)
    eps = torch.finfo(torch.bfloat16).eps
    assert_within(out[:1], expected, 2 ** -12 + eps * expected.abs())
    # The first bad entry in the sequences' order is named.
    with pytest.raises(kjit.BadArgument,
                       match=rf"block_tables\[1\]\[2\] is {num_blocks + 5}, past the cache"):
        ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, validate=True)
    tables[1, 2] = good_page
    with pytest.raises(kjit.BadArgument, match=rf"seq_lens\[2\] is {capacity + 1}, outside"):
        ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, validate=True)
    lens[2] = 40
    validated = ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, validate=True)
    assert not validated.isnan().any()


def rotate(x, positions, cos_sin_cache, is_neox):
    """float64 RoPE of x [tokens, heads, head_dim] as vLLM's rotary_embedding: the first
    rotary_dim elements of each head, in halves (neox) or in pairs (gptj)."""
    x = x.double().clone()
    rotary_dim = cos_sin_cache.shape[1]
    cos, sin = cos_sin_cache[positions].double().chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    if is_neox:
        first, second = x[..., :rotary_dim // 2].clone(), x[..., rotary_dim // 2:rotary_dim].clone()
        x[..., :rotary_dim // 2] = first * cos - second * sin
        x[..., rotary_dim // 2:rotary_dim] = second * cos + first * sin
    else:
        even, odd = x[..., 0:rotary_dim:2].clone(), x[..., 1:rotary_dim:2].clone()
        x[..., 0:rotary_dim:2] = even * cos - odd * sin
        x[..., 1:rotary_dim:2] = odd * cos + even * sin
    return x


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("kv", ["model", "fp8"])
@pytest.mark.parametrize("rope", [None, "neox", "gptj"])
def test_reshape_and_cache_against_torch(dtype, kv, rope):
    """Key and value slices of a fused qkv written through a shuffled slot mapping with skipped
    (-1) tokens into a NaN-poisoned cache: each slot written holds its token (rotated, or
    quantised), every other row stays NaN."""
    if kv == "fp8" and FP8 is None:
        pytest.skip(f"torch {torch.__version__} has no float8_e4m3fn")
    torch.manual_seed(0)
    tokens, q_heads, kv_heads, head_dim, page, num_blocks = 37, 8, 2, 128, 16, 5
    qkv = randn(tokens, (q_heads + 2 * kv_heads) * head_dim, dtype=dtype)
    row = kv_heads * head_dim
    key = qkv[:, q_heads * head_dim:q_heads * head_dim + row].view(tokens, kv_heads, head_dim)
    value = qkv[:, q_heads * head_dim + row:].view(tokens, kv_heads, head_dim)
    slots = torch.randperm(num_blocks * page, device=DEVICE)[:tokens]
    slots[::7] = -1  # padding: skipped
    shape = (num_blocks, page, kv_heads, head_dim)
    k_scale, v_scale = 0.02, 0.05
    if kv == "model":
        k_cache, v_cache = poisoned(shape, dtype), poisoned(shape, dtype)
    else:  # e4m3's NaN byte
        k_cache = torch.full(shape, 0x7F, dtype=torch.uint8, device=DEVICE).view(FP8)
        v_cache = k_cache.clone()
    rotation = {}
    expected_keys = key.double()
    if rope is not None:
        max_position, rotary_dim = 64, 96  # a partial rotation: the last 32 elements pass through
        angles = torch.rand(max_position, rotary_dim // 2, device=DEVICE) * 6.3
        cos_sin_cache = torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype)
        positions = torch.randint(0, max_position, (tokens,), device=DEVICE)
        rotation = {"positions": positions, "cos_sin_cache": cos_sin_cache,
                    "is_neox": rope == "neox"}
        expected_keys = rotate(key, positions, cos_sin_cache, rope == "neox")
    ops.reshape_and_cache(key, value, k_cache, v_cache, slots, k_scale=k_scale, v_scale=v_scale,
                          **rotation)
    written = slots >= 0
    # The caches' values in float64 (exact from either format), one row a slot.
    k_rows, v_rows = (cache.double().view(-1, kv_heads, head_dim) for cache in (k_cache, v_cache))
    got_k, got_v = k_rows[slots[written]], v_rows[slots[written]]
    exact_k, exact_v = expected_keys[written], value[written].double()
    if kv == "model":
        # Rotated in float and rounded once (half a unit, doubled for room); else copied.
        eps = torch.finfo(dtype).eps
        assert_within(got_k, exact_k, eps * exact_k.abs() + 1e-6)
        assert torch.equal(got_v, exact_v)
    else:
        # One e4m3 step of x / scale (2^-3 relative, 2^-9 absolute below 2^-6): the C++ test's.
        for got, exact, scale in ((got_k, exact_k, k_scale), (got_v, exact_v, v_scale)):
            assert_within(got * scale, exact, (exact.abs() / scale * 2 ** -3 + 2 ** -9) * scale)
    untouched = torch.ones(k_rows.shape[0], dtype=torch.bool, device=DEVICE)
    untouched[slots[written]] = False
    for rows in (k_rows, v_rows):
        assert rows[untouched].isnan().all(), "a row no token maps to was written"


def fp8_operands(m, n, k):
    """a [m, k] and a weight [n, k] in e4m3 with realistic spreads (values up to 448 before
    their scales)."""
    a = (torch.rand(m, k, device=DEVICE) * 2 - 1) * 448
    w = (torch.rand(n, k, device=DEVICE) * 2 - 1) * 448
    return a.to(FP8), w.to(FP8)


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("m", [1, 37, 256])
def test_gemm_fp8_against_torch(scaling, m):
    require_capability((9, 0), "gemm_fp8 runs on sm_90a (H100, H200) only")
    if FP8 is None:
        pytest.skip(f"torch {torch.__version__} has no float8_e4m3fn")
    torch.manual_seed(0)
    n, k = 264, 512  # n: 3 blocks of 128 for the block scales, the last partial
    a, w = fp8_operands(m, n, k)
    exponents = {"tensor": ((), ()), "row": ((m, 1), (1, n)),
                 "block": ((m, k // 128), (-(-n // 128), k // 128))}[scaling]
    scale_a = 10 ** (torch.rand(exponents[0], device=DEVICE) * 2 - 5)  # 1e-5 .. 1e-3
    scale_b = 10 ** (torch.rand(exponents[1], device=DEVICE) * 2 - 5)
    # Each element's scales, expanded to the operands' shapes.
    if scaling == "block":
        sa = scale_a.double().repeat_interleave(128, dim=1)
        sb = scale_b.double().repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)
    else:
        sa, sb = scale_a.double().reshape(-1, 1), scale_b.double().reshape(-1, 1)
    a_values, w_values = a.double() * sa, w.double() * sb
    exact = a_values @ w_values.T
    sizes = a_values.abs() @ w_values.abs().T
    out = poisoned((m, n), torch.bfloat16)
    assert ops.gemm_fp8(a, w.t(), scale_a, scale_b, out=out) is out
    # The C++ test's bound: 2^-9 of the products' magnitudes (the tensor cores' fp8 sums) plus
    # 2^-7 of the result (bfloat16's rounding, four times).
    assert_within(out, exact, 2 ** -9 * sizes + 2 ** -7 * exact.abs())
    functional = ops.gemm_fp8(a.view(torch.uint8), w.view(torch.uint8).t(), scale_a, scale_b)
    assert torch.equal(functional, out)


def test_gemm_fp8_takes_only_the_fp8_encoding_the_gpu_reads(monkeypatch):
    """kjit_gemm_fp8_encoding names what the GPU reads (e4m3fn on NVIDIA); operands of the other
    fp8 dtype are refused by name before the C++ operator, those of the one read reach it (its
    own check of k, which runs first, answers: nothing launches)."""
    fnuz = getattr(torch, "float8_e4m3fnuz", None)
    if FP8 is None or fnuz is None:
        pytest.skip(f"torch {torch.__version__} lacks float8_e4m3fn or float8_e4m3fnuz")
    read = ops._gemm_fp8_encoding()
    if torch.version.hip is None:
        assert read == 0, "an NVIDIA GPU reads e4m3fn"
    a, w = fp8_operands(16, 128, 128)
    scale = torch.ones((), device=DEVICE)
    for encoding in (read, 1 - read):  # the GPU's, then the other as if the GPU read it
        monkeypatch.setattr(ops, "_gemm_encoding", encoding)
        read_dtype, other = (FP8, fnuz) if encoding == 0 else (fnuz, FP8)
        with pytest.raises(kjit.BadArgument, match=rf"gemm_fp8: a is {other}, but kjit's GPU "
                                                   rf"\(cuda:\d+\) reads {read_dtype}"):
            ops.gemm_fp8(a.view(other), w.view(other).t(), scale, scale)
        with pytest.raises(kjit.BadArgument, match="k = 24 is not a multiple of 16"):
            ops.gemm_fp8(a[:, :24].contiguous().view(read_dtype),
                         w[:, :24].contiguous().view(read_dtype).t(), scale, scale)


# ---- fused_moe with FP8 weights ---------------------------------------------------------------


def quantized_experts(experts, rows, columns):
    """Experts' matrices [experts, rows, columns] of N(0, 0.02) values stored as DeepSeek-V3 stores
    them: per 128 x 128 block a float32 scale amax / 448 ([experts, rows / 128, columns / 128]) and
    the e4m3fn of value / scale; and the values they hold, in float64."""
    w = torch.randn(experts, rows, columns, device=DEVICE) * 0.02
    blocks = w.view(experts, rows // 128, 128, columns // 128, 128)
    scales = blocks.abs().amax(dim=(2, 4)) / 448
    expanded = scales[:, :, None, :, None]
    stored = (blocks / expanded).to(FP8)
    values = stored.double() * expanded.double()
    return (stored.view(experts, rows, columns), scales.contiguous(),
            values.view(experts, rows, columns))


def quantized_rows(x):
    """x's rows quantised per 1 x 128 block as fused_moe_fp8 quantises its activations (scale
    amax / 448, the e4m3fn of x * (448 / amax) in float32), in float64."""
    blocks = x.float().view(x.shape[0], -1, 128)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    inverse = torch.where(amax > 0, 448 / amax, torch.zeros_like(amax))
    return ((blocks * inverse).to(FP8).double() * (amax / 448).double()).view(x.shape)


def reference_moe_fp8(x, weights, ids, w13_values, w2_values):
    """float64, expert by expert over the token-slot pairs routed to it (ids outside [0, experts)
    add nothing), from x quantised as the device quantises it and the weights' exact values, the
    gated intermediate kept in float64 (the C++ reference::fused_moe_fp8). Also each output's
    magnitude, sum |weight| * (|w2[e]| @ |gated|)."""
    x_q, inter = quantized_rows(x), w13_values.shape[1] // 2
    out = torch.zeros(x.shape, dtype=torch.float64, device=DEVICE)
    magnitude = torch.zeros_like(out)
    for e in range(w13_values.shape[0]):
        tokens, slots = (ids == e).nonzero(as_tuple=True)
        gate_up = x_q[tokens] @ w13_values[e].T
        gated = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        weight = weights[tokens, slots].double()[:, None]
        out.index_add_(0, tokens, weight * (gated @ w2_values[e].T))
        magnitude.index_add_(0, tokens, weight.abs() * (gated.abs() @ w2_values[e].abs().T))
    return out, magnitude


def moe_fp8_routing(case, tokens, top_k, experts):
    """ids int32 [tokens, top_k] for `case`, and float32 weights in [0, 1)."""
    if case == "two experts, one token routed nowhere":  # the other experts receive no token
        order = torch.rand(tokens, 2, device=DEVICE).argsort(dim=1)
        ids = torch.tensor([1, 6], device=DEVICE)[order]
        ids[-1] = -1
    elif case == "one expert takes every token":
        ids = torch.full((tokens, top_k), 3, device=DEVICE)
    else:
        ids = torch.rand(tokens, experts, device=DEVICE).argsort(dim=1)[:, :top_k]
    return ids.int().contiguous(), torch.rand(tokens, top_k, device=DEVICE)


# (case, tokens, top_k): ragged counts over the experts, none a multiple of the GEMM's tiles
MOE_FP8_CASES = [
    ("two experts, one token routed nowhere", 37, 2),
    ("one expert takes every token", 300, 1),
    ("random top-3", 181, 3),
    ("one token", 1, 2),
]


@pytest.mark.parametrize("dtype", HALF_DTYPES)
@pytest.mark.parametrize("case, tokens, top_k", MOE_FP8_CASES)
def test_fused_moe_fp8_against_torch(dtype, case, tokens, top_k):
    """Block-scaled e4m3 experts (realistic scales: N(0, 0.02) weights, about 1e-4 a block)
    against the float64 reference, into a NaN-poisoned output. The device rounds the gated
    intermediate to dtype and quantises it to e4m3 per 1 x 128 block: at most 2^-4 of each
    |gated_j| and two units of dtype, so each output lies within (2^-4 + 2 eps) * magnitude +
    eps * |out| (the C++ test's bound); and as that bound grows with the sum of |terms|, the RMS
    of the error is also held below 2^-4 of the outputs' (e4m3's errors are of random signs)."""
    require_capability((9, 0), "fused_moe_fp8 runs on sm_90a (H100, H200) only")
    if FP8 is None:
        pytest.skip(f"torch {torch.__version__} has no float8_e4m3fn")
    torch.manual_seed(0)
    experts, hidden, inter = 8, 256, 384
    w13, w13_scales, w13_values = quantized_experts(experts, 2 * inter, hidden)
    w2, w2_scales, w2_values = quantized_experts(experts, hidden, inter)
    x = randn(tokens, hidden, dtype=dtype)
    ids, weights = moe_fp8_routing(case, tokens, top_k, experts)
    out = poisoned(x.shape, dtype)
    assert ops.fused_moe_fp8(x, weights, ids, w13, w2, w13_scales, w2_scales, out=out) is out
    expected, magnitude = reference_moe_fp8(x, weights, ids, w13_values, w2_values)
    eps = torch.finfo(dtype).eps
    bound = (2 ** -4 + 2 * eps) * magnitude + eps * expected.abs()
    assert_within(out, expected, bound)
    error_rms = (out.double() - expected).pow(2).mean().sqrt().item()
    out_rms = expected.pow(2).mean().sqrt().item()
    assert error_rms <= out_rms / 16, (error_rms, out_rms)
    # The functional form, with the weights as uint8 bytes (torch without float8's way).
    functional = ops.fused_moe_fp8(x, weights, ids, w13.view(torch.uint8), w2.view(torch.uint8),
                                   w13_scales, w2_scales)
    assert_within(functional, expected, bound)


def moe_fp8_inputs(tokens=16, experts=4, hidden=128, inter=256, top_k=2):
    torch.manual_seed(0)
    w13, w13_scales, _ = quantized_experts(experts, 2 * inter, hidden)
    w2, w2_scales, _ = quantized_experts(experts, hidden, inter)
    ids, weights = moe_fp8_routing("random", tokens, top_k, experts)
    return (randn(tokens, hidden, dtype=torch.bfloat16), weights, ids, w13, w2, w13_scales,
            w2_scales)


def decode_step(key, value, k_cache, v_cache, slots, q, tables, lens):
    """A decode step's attention: the new token's K and V into the cache, then attention over it."""
    ops.reshape_and_cache(key, value, k_cache, v_cache, slots)
    return ops.paged_attention_decode(q, k_cache, v_cache, tables, lens)


def decode_step_inputs(dtype=torch.bfloat16):
    torch.manual_seed(0)
    lengths, page, q_heads, kv_heads, head_dim = [9, 40, 1], 16, 8, 2, 128
    tables, num_blocks = paged_tables(lengths, page)
    shape = (num_blocks, page, kv_heads, head_dim)
    k_cache, v_cache = randn(*shape, dtype=dtype), randn(*shape, dtype=dtype)
    # Each sequence's last token is the new one: its slot in the last page its table names.
    slots = torch.tensor([int(tables[s, (n - 1) // page]) * page + (n - 1) % page
                          for s, n in enumerate(lengths)], device=DEVICE)
    key, value = (randn(len(lengths), kv_heads, head_dim, dtype=dtype) for _ in range(2))
    q = randn(len(lengths), q_heads, head_dim, dtype=dtype)
    lens = torch.tensor(lengths, dtype=torch.int32, device=DEVICE)
    return key, value, k_cache, v_cache, slots, q, tables, lens


def test_torch_compile_fullgraph_keeps_the_paged_and_fp8_operators():
    """Under torch.compile(fullgraph=True) the new operators stay torch.ops.kjit nodes of one
    graph (no break), and the compiled step computes what the eager one does (gemm_fp8 and
    fused_moe_fp8 on sm_90a)."""
    torch._dynamo.reset()
    seen = []

    def recording(graph_module, example_inputs):
        seen.extend(str(node.target) for node in graph_module.graph.nodes
                    if node.op == "call_function")
        return graph_module.forward
    inputs = decode_step_inputs()
    eager_inputs = [x.clone() for x in inputs]
    eager = decode_step(*eager_inputs)
    compiled = torch.compile(decode_step, fullgraph=True, backend=recording)(*inputs)
    for name in ("kjit.reshape_and_cache", "kjit.paged_attention_decode"):
        assert any(name in target for target in seen), (name, seen)
    assert torch.equal(compiled, eager) and torch.equal(inputs[2], eager_inputs[2])
    torch._dynamo.reset()
    inductor_inputs = [x.clone() for x in decode_step_inputs()]
    assert torch.equal(torch.compile(decode_step, fullgraph=True)(*inductor_inputs), eager)
    assert torch.equal(inductor_inputs[2], eager_inputs[2])  # the cache written in place
    if capability() >= (9, 0) and FP8 is not None:
        a, w = fp8_operands(16, 256, 256)
        scale_a, scale_b = torch.full((16, 1), 1e-4, device=DEVICE), torch.full((1, 256), 1e-4,
                                                                               device=DEVICE)
        torch._dynamo.reset()
        seen.clear()
        compiled = torch.compile(ops.gemm_fp8, fullgraph=True, backend=recording)(
            a, w.t(), scale_a, scale_b)
        assert any("kjit.gemm_fp8" in target for target in seen), seen
        assert torch.equal(compiled, ops.gemm_fp8(a, w.t(), scale_a, scale_b))
        moe = moe_fp8_inputs()
        torch._dynamo.reset()
        seen.clear()
        compiled = torch.compile(ops.fused_moe_fp8, fullgraph=True, backend=recording)(*moe)
        assert any("kjit.fused_moe_fp8" in target for target in seen), seen
        assert torch.equal(compiled, ops.fused_moe_fp8(*moe))


def test_torch_compile_fullgraph_keeps_moe_align_and_fused_moe_with_validate():
    """moe_align (four outputs) and fused_moe with validate=True stay torch.ops.kjit nodes of one
    graph under torch.compile(fullgraph=True), validate among the node's arguments, and compute
    what the eager calls do (fused_moe on sm_90a)."""
    torch._dynamo.reset()
    seen = []

    def recording(graph_module, example_inputs):
        seen.extend((str(node.target), node.args) for node in graph_module.graph.nodes
                    if node.op == "call_function")
        return graph_module.forward
    torch.manual_seed(0)
    ids = out_of_range(drawn_ids(37, 6, [1.0] * 64), 64).to(DEVICE)

    def align(ids):  # the rows the alignment leaves unwritten are not compared
        _, _, positions, totals = ops.moe_align(ids, 64, block_m=64)
        return positions, totals
    compiled = torch.compile(align, fullgraph=True, backend=recording)(ids)
    assert any("kjit.moe_align" in target for target, _ in seen), seen
    assert all(torch.equal(c, e) for c, e in zip(compiled, align(ids)))
    if capability() >= (9, 0):
        call, _, moe_ids, _, _ = validate_case("bfloat16")
        torch._dynamo.reset()
        seen.clear()
        compiled = torch.compile(lambda ids: call(ids, validate=True), fullgraph=True,
                                 backend=recording)(moe_ids)
        assert any("kjit.fused_moe" in target and args[-1] is True for target, args in seen), seen
        assert torch.equal(compiled, call(moe_ids, validate=True))


def test_capture_of_the_paged_and_fp8_operators_after_the_warmup_their_errors_name():
    key, value, k_cache, v_cache, slots, q, tables, lens = decode_step_inputs(torch.float16)
    # key and value strided, 8 bytes past 16-byte alignment: the warm-up item reproduces both
    qkv = randn(3, 4 * 128 * 2 + 4, dtype=torch.float16)
    strided_key = qkv[:, 4:4 + 256].view(3, 2, 128)
    strided_value = qkv[:, 4 + 256:4 + 512].view(3, 2, 128)
    calls = [lambda: ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, scale=0.05),
             lambda: ops.reshape_and_cache(strided_key, strided_value, k_cache, v_cache, slots)]
    if capability() >= (9, 0) and FP8 is not None:
        a, w = fp8_operands(8, 128, 256)
        scale_a = torch.full((8, 2), 1e-4, device=DEVICE)
        scale_b = torch.full((1, 2), 1e-4, device=DEVICE)
        calls.append(lambda: ops.gemm_fp8(a, w.t(), scale_a, scale_b))
        moe = moe_fp8_inputs(tokens=5)
        calls.append(lambda: ops.fused_moe_fp8(*moe))
    for call in calls:
        item = warmup_item_named_by_a_capture(call)
        torch.cuda.synchronize()
        kjit.warmup([item])
        caches = k_cache.clone(), v_cache.clone()
        graph, captured = capture(call)
        graph.replay()
        torch.cuda.synchronize()
        if item["op"] == "reshape_and_cache":
            replayed = k_cache.clone(), v_cache.clone()
            k_cache.copy_(caches[0])
            v_cache.copy_(caches[1])
            call()
            assert torch.equal(replayed[0], k_cache) and torch.equal(replayed[1], v_cache)
            continue
        eager = call()
        assert torch.equal(captured, eager), item["op"]
