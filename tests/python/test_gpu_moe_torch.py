"""kjit.ops' mixture-of-experts layer, its routing, the FP8 GEMMs and linear against torch on a
GPU (tools/gpu-check --run-python), at the shapes and inputs issue 28's audit found missing from
test_gpu_attention_moe.py:

- fused_moe (float16, bfloat16) on a Mixtral-like layer (8 experts, top 2, hidden 4096, inter
  14336) and a DeepSeek-like fine-grained one (64 experts, top 6, 2048 / 1408) at ragged token
  counts, routed by kjit's topk_softmax and by hand (experts that receive no token, one expert
  that receives every token, slots routed nowhere);
- DeepSeek-V3's routing (256 experts, sigmoid scores with a bias for the choice, 8 groups of
  which 4 are searched, top 8, renormalised, times 2.5) through moe_topk against float64 torch
  written from the published algorithm, then through fused_moe (hidden 1024, inter 256);
- routing of logits with many equal values against torch.topk on the same GPU;
- fused_moe_fp8 and gemm_fp8 with weight block scales spread over three orders of magnitude and
  activations with outlier channels (the existing tests' scales are near-uniform);
- linear at 1 to 128 rows on 4096 x 4096, 14336 x 4096 and 8192 x 8192 weights.

Each reference is torch in float64 on the GPU from the same rounded inputs (no TF32 setting can
reach it; float64 is at least as exact as the fp32 reference asked for and costs milliseconds
here), each output is poisoned with NaN before the call, each test seeds torch from its own name
and prints the seed (pytest shows the print on a failure) and states its bounds where it checks
them. The GPU tests skip, with the reason, without torch >= 2.4 and a CUDA GPU, and each where
its operator does not run (fused_moe, fused_moe_fp8 and gemm_fp8: sm_90a only); the tests named
*_on_cpu check this file's own references and its e4m3 encoder against plain loops, anywhere.

The e4m3 bytes are made here (encode_e4m3, checked against a search of the 256 codes and, where
torch has float8_e4m3fn, against torch's conversion) and passed as uint8, which kjit reads as
the GPU's e4m3fn."""

import math
import warnings
import zlib

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

import torch.nn.functional as F  # noqa: E402

import kjit.ops as ops  # noqa: E402


def _version(text):
    return tuple(int(p) for p in text.split("+")[0].split(".")[:2])


if _version(torch.__version__) < (2, 4):
    NO_GPU = f"torch {torch.__version__} is older than 2.4"
elif not torch.cuda.is_available():
    NO_GPU = "no GPU (torch.cuda.is_available() is False)"
else:
    NO_GPU = None
gpu = pytest.mark.skipif(NO_GPU is not None, reason=NO_GPU or "")

DEVICE = "cuda"
HALF_DTYPES = [torch.bfloat16, torch.float16]


def require_sm90a(op):
    capability = torch.cuda.get_device_capability() if torch.version.hip is None else None
    if capability != (9, 0):
        pytest.skip(f"{op} runs on sm_90a (H100, H200) only; this GPU is "
                    f"{torch.cuda.get_device_name()} (capability {capability})")


def require_sm80(op):
    capability = torch.cuda.get_device_capability() if torch.version.hip is None else None
    if capability is None or capability < (8, 0):
        pytest.skip(f"{op} runs on NVIDIA sm_80 and newer here; this GPU is "
                    f"{torch.cuda.get_device_name()} (capability {capability})")


@pytest.fixture
def seed(request):
    """torch seeded from the test's name (its parameters included), printed: pytest shows it
    with a failure, and the same name gives the same inputs again."""
    value = zlib.crc32(request.node.name.encode())
    torch.manual_seed(value)
    print(f"{request.node.name}: torch.manual_seed({value})")
    return value


_held = {}  # the weights of the last layer or linear shape made: ({key: tensors})


@pytest.fixture(scope="module", autouse=True)
def _release_held_weights():
    yield
    _held.clear()


def held(key, make):
    """make()'s result for `key`, made once and kept until another key is asked for (Mixtral's
    weights are 2.8 GB: one set at a time)."""
    if key not in _held:
        _held.clear()
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
        _held[key] = make()
    return _held[key]


def generator(name):
    """A generator of DEVICE seeded by `name`: weights that do not depend on which test made
    them first, nor on the test's own seed."""
    g = torch.Generator(device=DEVICE)
    g.manual_seed(zlib.crc32(name.encode()))
    return g


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)


# ---- checks -----------------------------------------------------------------------------------


def _at(index):
    return tuple(int(i) for i in index)


def check_no_poison(what, out, seed):
    left = out.isnan()
    if left.any():
        raise AssertionError(f"{what}: {int(left.sum())} of {out.numel()} elements still hold the "
                             f"NaN poison, the first at {_at(left.nonzero()[0])} (seed {seed})")


def check_within(what, got, expected, bound, seed):
    """|got - expected| <= bound element-wise: expected and bound float64 (bound a tensor or a
    number); NaN (the poison) is never within."""
    error = (got.double() - expected).abs()
    bound = torch.as_tensor(bound, dtype=torch.float64, device=error.device).expand_as(error)
    bad = ~(error <= bound)
    if bad.any():
        at = _at(bad.nonzero()[0])
        worst = (error / bound).nan_to_num(float("inf")).max().item()
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {error.numel()} elements outside the bound (seed "
            f"{seed}); the first at {at}: got {got[at].item()!r}, expected "
            f"{expected[at].item()!r} within {bound[at].item():.4g}; the largest error / bound "
            f"{worst:.3g}")


def check_rms_per_row(what, got, expected, factor, seed):
    """Each row's RMS error <= factor * the RMS of its reference row (a row of zeros must be
    exactly zeros). The element-wise bounds grow with the sum of |terms|, about sqrt(K) times
    the result where signs are random, so they would pass an error as large as the result
    itself; rounding errors of random sign add up to about their own size instead, which this
    holds."""
    error = (got.double() - expected).pow(2).mean(-1).sqrt()
    scale = expected.pow(2).mean(-1).sqrt()
    bad = ~(error <= factor * scale)
    if bad.any():
        row = _at(bad.nonzero()[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} rows have an RMS error above "
            f"{factor:.3g} of their reference's RMS (seed {seed}); the first, row {row}: "
            f"{error[row].item():.4g} against {scale[row].item():.4g}")


# ---- e4m3 (fp8) -------------------------------------------------------------------------------


def _e4m3_table():
    """The value of each e4m3fn code in float64: sign, 4 exponent bits (bias 7), 3 mantissa bits;
    exponent 0 subnormal (m * 2^-9); 0x7f and 0xff NaN (no infinities), 448 the largest."""
    codes = torch.arange(256)
    exponent, mantissa = (codes >> 3) & 15, (codes & 7).double()
    normal = (1 + mantissa / 8) * torch.pow(2.0, (exponent - 7).double())
    value = torch.where(exponent == 0, mantissa * 2.0 ** -9, normal)
    value = torch.where(codes >= 128, -value, value)
    value[(codes & 127) == 127] = float("nan")
    return value


E4M3_VALUES = _e4m3_table()


def e4m3_values(codes):
    """The values (float64) of uint8 e4m3fn codes."""
    return E4M3_VALUES.to(codes.device)[codes.long()]


def encode_e4m3(x):
    """The e4m3fn codes (uint8) of finite float x: nearest value, ties to the even code,
    saturating to +-448, as __nv_cvt_float_to_fp8(__NV_SATFINITE, __NV_E4M3) converts (kjit's
    quantisation, DeepGEMM's). Computed exactly in float64: a / 2^(e - 3) only moves exponents."""
    a = x.double().abs().clamp(max=448.0)
    _, exponent = torch.frexp(a)  # a = m * 2^exponent, m in [0.5, 1): binade exponent - 1
    binade = torch.where(a < 2.0 ** -6, torch.full_like(exponent, -6), exponent - 1)
    steps = torch.round(a / torch.pow(2.0, (binade - 3).double()))  # half to even; 0 .. 16
    # Normal: exponent field binade + 7, mantissa steps - 8; subnormal (binade -6): steps alone.
    # steps 16 carries into the next binade's code by itself.
    codes = (binade + 6).long() * 8 + steps.long()
    codes = torch.where(torch.signbit(x), codes + 128, codes)
    return codes.to(torch.uint8)


def quantize_rows(x, block):
    """float32 x [rows, columns] quantised per 1 x `block` block as kjit's moe_quantize_fp8 and
    DeepSeek-V3's activations are: scale amax / 448 (float32), codes e4m3 of x * (448 / amax)
    computed in float32 (the device's expression), zeros for a block of zeros. Returns the codes
    [rows, columns], the scales [rows, columns / block] and the values the codes hold times their
    scales, in float64."""
    rows, columns = x.shape
    blocks = x.float().reshape(rows, columns // block, block)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    inverse = torch.where(amax > 0, 448 / amax, torch.zeros_like(amax))
    codes = encode_e4m3(blocks * inverse)
    scales = amax / 448
    values = e4m3_values(codes) * scales.double()
    return (codes.reshape(rows, columns), scales.reshape(rows, columns // block).contiguous(),
            values.reshape(rows, columns))


def fp8_weights(shape, block, center, decades, g):
    """Weights [..., rows, columns] stored as DeepSeek-V3 stores them, with scales spread on
    purpose: each block of block[0] x block[1] holds e4m3 codes of N(0, 1) * 112 clipped to
    +-448 (a block's largest near 448, as amax / 448 scaling leaves it) and a float32 scale
    log-uniform over `decades` orders of magnitude around `center`. Returns the codes (uint8),
    the scales [..., ceil(rows / block[0]), columns / block[1]] and the values (float64)."""
    *lead, rows, columns = shape
    z = (torch.randn(shape, generator=g, device=DEVICE) * 112).clamp(-448, 448)
    codes = encode_e4m3(z)
    grid = (*lead, -(-rows // block[0]), columns // block[1])
    exponents = (torch.rand(grid, generator=g, device=DEVICE) - 0.5) * decades
    scales = (center * torch.pow(10.0, exponents)).float().contiguous()
    expanded = scales.double().repeat_interleave(block[0], dim=-2)[..., :rows, :]
    expanded = expanded.repeat_interleave(block[1], dim=-1)
    return codes, scales, e4m3_values(codes) * expanded


def activations_with_outliers(rows, columns):
    """float32 [rows, columns] of N(0, 1) with columns / 256 outlier channels (at least one), each
    10 to 100 times larger (10^U(1, 2)) in every row, as the hidden states of large language
    models carry them."""
    x = torch.randn(rows, columns, device=DEVICE)
    count = max(1, columns // 256)
    channels = torch.randperm(columns, device=DEVICE)[:count]
    x[:, channels] *= torch.pow(10.0, 1 + torch.rand(count, device=DEVICE))
    return x


def spread(scales):
    """The ratio of the largest scale to the smallest."""
    return (scales.max() / scales.min()).item()


# ---- the layer's reference --------------------------------------------------------------------


def reference_moe(x, weights, ids, w13, w2, quantized=False):
    """fused_moe in float64, expert by expert over the token-slot pairs routed to it (ids outside
    [0, experts) add nothing), from x and the weights as given (tensors of any dtype: their
    values), the gated intermediate silu(x w_gate^T) * (x w_up^T) unrounded: w13 [experts,
    2 * inter, hidden] holds each expert's gate rows, then its up rows (vLLM's w13, the C++
    MoeWeights); out[t] = sum over slots of weights[t, s] * w2[e] @ gated, the weights as given
    (fused_moe does not renormalise them). Also each output's magnitude, sum over slots of
    |weight| * (|w2[e]| @ |gated|) (the C++ reference's), and with `quantized` the floor of
    e4m3's absolute error in the gated intermediate: sum over slots of |weight| * (|w2[e]| @ f),
    f_j = 2^-10 * amax / 448 of the 1 x 128 block of gated holding j (half the subnormal step
    2^-9 of the block's scale), times 1.25 for the device's amax of its own gated values."""
    experts, inter = w13.shape[0], w13.shape[1] // 2
    xd = x.double()
    out = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    magnitude, floor = torch.zeros_like(out), torch.zeros_like(out)
    for e in range(experts):
        tokens, slots = (ids == e).nonzero(as_tuple=True)
        if tokens.numel() == 0:
            continue
        gate_up = xd[tokens] @ w13[e].double().T
        gated = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        down = w2[e].double()
        weight = weights[tokens, slots].double()[:, None]
        out.index_add_(0, tokens, weight * (gated @ down.T))
        down = down.abs()
        magnitude.index_add_(0, tokens, weight.abs() * (gated.abs() @ down.T))
        if quantized:
            amax = gated.abs().reshape(len(tokens), inter // 128, 128).amax(dim=-1)
            f = (1.25 * 2.0 ** -10 / 448 * amax).repeat_interleave(128, dim=1)
            floor.index_add_(0, tokens, weight.abs() * (f @ down.T))
    return (out, magnitude, floor) if quantized else (out, magnitude)


def check_layer(what, out, x, weights, ids, w13, w2, seed):
    """fused_moe's out against reference_moe. Bounds: element-wise 2 eps * magnitude + eps *
    |expected| (the C++ test's: the gated intermediate and each expert's output are rounded to
    the dtype once each, at most half an eps of the magnitude each, the sum once more, half an
    eps of the result; doubled for room), and each token's RMS error within eps of its
    reference's RMS: those roundings are of random sign, about eps / 2 of the RMS together
    (at most eps / (2 sqrt 3) each, three of them; 0.48 eps at worst over the tokens of every
    case here in an emulation of the device's roundings on the CPU), so eps leaves twice room
    while holding the error 100 times tighter than the magnitude does at these K (where a 1%
    error of bfloat16 outputs would pass it). float32 accumulation (sqrt(K) 2^-24 of the
    magnitude, in effect) is far below both."""
    check_no_poison(what, out, seed)
    expected, magnitude = reference_moe(x, weights, ids, w13, w2)
    eps = torch.finfo(out.dtype).eps
    check_within(what, out, expected, 2 * eps * magnitude + eps * expected.abs(), seed)
    check_rms_per_row(what, out, expected, eps, seed)


def check_topk_sets(what, ids, scores, seed):
    """Each token's ids, as a set, are those of torch.topk of `scores` on the same device (the
    routing the layer tests run on, checked so that a routing of nothing cannot pass them)."""
    expected = scores.topk(ids.shape[1], dim=-1).indices.sort(dim=-1).values
    got = ids.long().sort(dim=-1).values
    bad = ~(got == expected).all(dim=-1)
    if bad.any():
        t = int(bad.nonzero()[0])
        raise AssertionError(f"{what}: token {t} routed to {ids[t].tolist()}, torch.topk "
                             f"chooses {expected[t].tolist()} (seed {seed})")


# ---- fused_moe: Mixtral-like and DeepSeek-like fine-grained layers ------------------------------

# name: (experts, top_k, hidden, inter, renormalize: how topk_softmax routes it)
LAYERS = {
    "Mixtral-like": (8, 2, 4096, 14336, True),  # Mixtral 8x7B renormalises its top 2
    "DeepSeek-like": (64, 6, 2048, 1408, False),  # DeepSeek-V2-Lite's MoE: top 6 unnormalised
    "DeepSeek-V3-routed": (256, 8, 1024, 256, True),  # V3's routing, smaller experts
}


def layer_weights(name, dtype):
    """w13 [experts, 2 inter, hidden] ~ N(0, 1 / hidden) and w2 [experts, hidden, inter] ~
    N(0, 1 / inter) in dtype (outputs of about unit size), from the layer's own generator."""
    def make():
        experts, _, hidden, inter, _ = LAYERS[name]
        g = generator(f"{name} {dtype}")
        w13 = torch.empty(experts, 2 * inter, hidden, dtype=dtype, device=DEVICE)
        w2 = torch.empty(experts, hidden, inter, dtype=dtype, device=DEVICE)
        for e in range(experts):  # expert by expert: no float32 copy of the whole layer
            w13[e] = torch.randn(2 * inter, hidden, generator=g, device=DEVICE) / hidden ** 0.5
            w2[e] = torch.randn(hidden, inter, generator=g, device=DEVICE) / inter ** 0.5
        return w13, w2
    return held(("layer", name, dtype), make)


def hand_routing(kind, tokens, experts, top_k):
    """ids int32 [tokens, top_k] (distinct experts per token, in shuffled slots) and float32
    weights in [0, 1). "few experts": every token's experts among top_k of them (8 experts) or
    top_k + 4 (more), the others receiving no token, and the last token and token 0's last slot
    routed nowhere (-1); "one expert for all": one expert in every token, at a random slot, the
    others random."""
    scores = torch.rand(tokens, experts, device=DEVICE)
    if kind == "few experts":
        used = top_k if experts <= 8 else top_k + 4
        scores[:, torch.randperm(experts, device=DEVICE)[used:]] = -1
    else:
        scores[:, int(torch.randint(experts, ()))] = 2
    ids = scores.topk(top_k, dim=-1).indices
    ids = ids.gather(1, torch.rand(tokens, top_k, device=DEVICE).argsort(dim=1))
    if kind == "few experts":
        ids[-1] = -1
        ids[0, -1] = -1
    return ids.int().contiguous(), torch.rand(tokens, top_k, device=DEVICE)


def moe_case(layer, dtype, routing, tokens):
    name = f"{layer}-{str(dtype).split('.')[-1]}-{routing.replace(' ', '_')}-{tokens}"
    return pytest.param(layer, dtype, routing, tokens, id=name)


# Token counts ragged against the 128-row tiles and spread over the paths: one token (the decode
# path), up to 2048 pairs (the gate-up GEMM gathers its rows), above (moe_gather, dynamic order).
MOE_CASES = [moe_case(layer, dtype, routing, tokens)
             for layer, counts, few, everyone in [("Mixtral-like", [1, 37, 300, 1100], 37, 300),
                                                  ("DeepSeek-like", [1, 100, 777], 100, 777)]
             for dtype in HALF_DTYPES
             for routing, tokens in ([("topk_softmax", n) for n in counts] +
                                     [("few experts", few), ("one expert for all", everyone)])]


@gpu
@pytest.mark.parametrize("layer, dtype, routing, tokens", MOE_CASES)
def test_fused_moe_against_torch(layer, dtype, routing, tokens, seed):
    """fused_moe into a NaN-poisoned output against the float64 reference (check_layer's
    bounds), routed by kjit's topk_softmax (its ids checked, as sets, against torch.topk) or by
    hand: experts that receive no token, one expert that receives every token."""
    require_sm90a("fused_moe")
    experts, top_k, hidden, inter, renormalize = LAYERS[layer]
    w13, w2 = layer_weights(layer, dtype)
    x = torch.randn(tokens, hidden, device=DEVICE).to(dtype)
    what = f"fused_moe {layer} {dtype} {routing} {tokens} tokens"
    if routing == "topk_softmax":
        logits = torch.randn(tokens, experts, device=DEVICE).to(dtype)
        weights, ids = ops.topk_softmax(logits, top_k, renormalize)
        check_topk_sets(what + " routing", ids, torch.softmax(logits.float(), dim=-1), seed)
    else:
        ids, weights = hand_routing(routing, tokens, experts, top_k)
        received = torch.bincount(ids[ids >= 0].long(), minlength=experts)
        if routing == "few experts":  # the setup itself: experts left without a token
            assert int((received == 0).sum()) >= experts - (top_k if experts <= 8 else top_k + 4)
        else:
            assert int(received.max()) == tokens
    out = poisoned(x.shape, dtype)
    assert ops.fused_moe(x, weights, ids, w13, w2, out=out) is out
    check_layer(what, out, x, weights, ids, w13, w2, seed)


# ---- DeepSeek-V3's routing --------------------------------------------------------------------

V3 = {"experts": 256, "top_k": 8, "groups": 8, "top_groups": 4, "scale": 2.5}
# float32 evaluations of sigmoid(logit) + bias differ from float64 by a few units of 2^-24 (the
# exponential, the division, the addition): at most about 5e-7 for values below 2. Choices
# closer than these margins may order either way, and a group's score (two choices summed) twice.
EXPERT_MARGIN, GROUP_MARGIN = 2e-6, 4e-6


def deepseek_v3_routing(logits, bias, top_k, groups, top_groups, scale):
    """DeepSeek-V3's routing (its MoEGate, "noaux_tc"), in float64: scores sigmoid(logits); the
    choice scores + bias; each group's score the sum of its two best choices; the top_groups
    best groups; of their experts the top_k best choices (the others masked with -inf, as vLLM's
    grouped_topk; DeepSeek's own code masks with 0.0, the same wherever at least top_k choices
    are positive); weights the chosen scores without the bias, divided by their sum, times scale.
    Equal values go to the lower index (a stable sort). Returns the ids [tokens, top_k] (int64,
    best first), the weights (float64) and, per token, the margins a float32 evaluation could
    cross: between the top_groups-th group and the next, between the top_k-th choice and the
    next, and the least gap between consecutive chosen experts (their order)."""
    scores = torch.sigmoid(logits.double())
    choice = scores + bias.double()
    tokens, experts = choice.shape
    best_two = -torch.sort(-choice.reshape(tokens, groups, -1), dim=-1, stable=True).values[..., :2]
    group_scores = best_two.sum(dim=-1)
    sorted_groups, group_order = torch.sort(-group_scores, dim=-1, stable=True)
    sorted_groups = -sorted_groups
    allowed = torch.zeros(tokens, groups, dtype=torch.bool, device=logits.device)
    allowed.scatter_(1, group_order[:, :top_groups], True)
    allowed = allowed.repeat_interleave(experts // groups, dim=1)
    masked = choice.masked_fill(~allowed, float("-inf"))
    sorted_choice, order = torch.sort(-masked, dim=-1, stable=True)
    sorted_choice = -sorted_choice
    ids = order[:, :top_k]
    weights = scores.gather(1, ids)
    weights = weights / weights.sum(dim=-1, keepdim=True) * scale
    group_margin = (sorted_groups[:, top_groups - 1] - sorted_groups[:, top_groups]
                    if top_groups < groups else torch.full_like(sorted_groups[:, 0], math.inf))
    choice_margin = sorted_choice[:, top_k - 1] - sorted_choice[:, top_k]
    order_margin = (sorted_choice[:, :top_k - 1] - sorted_choice[:, 1:top_k]).amin(dim=-1)
    return ids, weights, (group_margin, choice_margin, order_margin)


@gpu
@pytest.mark.parametrize("tokens", [1, 100, 513])
def test_deepseek_v3_routing_then_the_layer_against_torch(tokens, seed):
    """moe_topk as DeepSeek-V3 routes (float32 logits, as its gate computes them; a bias of
    N(0, 0.1) per expert) against deepseek_v3_routing: where the reference's margins exceed
    float32's reach the ids must be equal in order (best first, equal values to the lower
    index), where only the order is that close equal as sets; tokens whose choice itself lies
    within reach (expected ~1%) are only checked for distinct ids in at most 4 groups, and at
    most 2% of the tokens (at least 1) may be such. Weights within 1e-5 * 2.5 (float32 sigmoid
    and sum: a few 1e-7 relative). Then fused_moe (bfloat16, 256 experts of hidden 1024, inter
    256) on that routing, check_layer's bounds."""
    require_sm90a("fused_moe")
    experts, top_k, groups, top_groups, scale = (V3[k] for k in ("experts", "top_k", "groups",
                                                                 "top_groups", "scale"))
    logits = torch.randn(tokens, experts, device=DEVICE)
    bias = torch.randn(experts, device=DEVICE) * 0.1
    weights = poisoned((tokens, top_k), torch.float32)
    ids = torch.full((tokens, top_k), -7, dtype=torch.int32, device=DEVICE)
    result = ops.moe_topk(logits, top_k, bias=bias, scoring="sigmoid", groups=groups,
                          top_groups=top_groups, renormalize=True, scale=scale, out=(weights, ids))
    assert result[0] is weights and result[1] is ids
    check_no_poison("moe_topk weights", weights, seed)
    ref_ids, ref_weights, (group_margin, choice_margin, order_margin) = deepseek_v3_routing(
        logits, bias, top_k, groups, top_groups, scale)
    got = ids.long()
    # Every token: distinct ids in [0, experts) from at most top_groups groups, weights summing
    # to the scale.
    assert bool(((got >= 0) & (got < experts)).all()), f"ids out of range (seed {seed})"
    assert bool((got.sort(dim=-1).values.diff(dim=-1) > 0).all()), f"repeated ids (seed {seed})"
    used_groups = torch.zeros(tokens, groups, device=DEVICE).scatter_(1, got // (experts // groups),
                                                                      1.0)
    assert bool((used_groups.sum(dim=-1) <= top_groups).all()), f"> {top_groups} groups ({seed})"
    check_within("moe_topk weights' sums", weights.double().sum(dim=-1),
                 torch.full((tokens,), scale, dtype=torch.float64, device=DEVICE), 1e-5 * scale,
                 seed)
    clear = (group_margin > GROUP_MARGIN) & (choice_margin > EXPERT_MARGIN)
    ordered = clear & (order_margin > EXPERT_MARGIN)
    same_order = (got == ref_ids).all(dim=-1)
    same_set = (got.sort(dim=-1).values == ref_ids.sort(dim=-1).values).all(dim=-1)
    bad = (ordered & ~same_order) | (clear & ~same_set)
    if bad.any():
        t = int(bad.nonzero()[0])
        raise AssertionError(
            f"moe_topk token {t} of {tokens}: kjit {ids[t].tolist()}, DeepSeek-V3's routing "
            f"{ref_ids[t].tolist()} (margins: group {group_margin[t].item():.3g}, choice "
            f"{choice_margin[t].item():.3g}, order {order_margin[t].item():.3g}; seed {seed})")
    unclear = int((~clear).sum())
    assert unclear <= max(1, tokens // 50), (
        f"{unclear} of {tokens} tokens within float32's reach of a tie: too many to trust the "
        f"comparison (seed {seed})")
    by_id = got.argsort(dim=-1)
    check_within("moe_topk weights", weights.gather(1, by_id)[clear],
                 ref_weights.gather(1, ref_ids.argsort(dim=-1))[clear], 1e-5 * scale, seed)
    if tokens >= 100:  # the inputs exercise both rules: the bias and the groups change choices
        unbiased, _, _ = deepseek_v3_routing(logits, torch.zeros_like(bias), top_k, groups,
                                             top_groups, scale)
        ungrouped, _, _ = deepseek_v3_routing(logits, bias, top_k, 1, 1, scale)
        assert bool((unbiased != ref_ids).any()) and bool((ungrouped != ref_ids).any())

    w13, w2 = layer_weights("DeepSeek-V3-routed", torch.bfloat16)
    x = torch.randn(tokens, w13.shape[2], device=DEVICE).to(torch.bfloat16)
    out = poisoned(x.shape, torch.bfloat16)
    assert ops.fused_moe(x, weights, ids, w13, w2, out=out) is out
    check_layer(f"fused_moe DeepSeek-V3-routed {tokens} tokens", out, x, weights, ids, w13, w2,
                seed)


# ---- ties against torch.topk ------------------------------------------------------------------
#
# What torch.topk does on CUDA with equal values (read from ATen's TensorTopK.cu and Sort.cu,
# torch 2.x; k <= 32 and rows of at most 256 take the single-block path): a radix select finds
# the k-th value, then one pass in index order writes every value above it and a second pass in
# index order fills the rest with values equal to it, so the chosen SET takes the lower indices
# among ties at the boundary, deterministically. sorted=True then sorts those k with
# sortKeyValueInplace(stable=false), a bitonic network for k <= 32: deterministic for a given
# input, but not stable, so equal values inside the top k come out in the network's order, not
# by index (for two equal values at indices 3 and 7 it gives 7, 3). kjit documents best first,
# equal values to the lower index. So this test holds kjit to torch.topk's set exactly, to the
# same sequence of values (the order differs at most among equal values), and to the lower-index
# order among them; it warns with the count of tokens where torch.topk's order among equal
# values differed, which is torch's order, not a fault of kjit's.

# (scoring, experts, top_k, groups, top_groups, renormalize)
TIE_CASES = [
    ("softmax", 8, 2, 1, 1, True),
    ("softmax", 64, 6, 1, 1, False),
    ("softmax", 256, 8, 1, 1, True),
    ("sigmoid", 64, 6, 8, 4, True),  # grouped without a bias: groups ranked by their best
]


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, *HALF_DTYPES])
@pytest.mark.parametrize("scoring, experts, top_k, groups, top_groups, renormalize", TIE_CASES)
def test_routing_ties_against_torch_topk(dtype, scoring, experts, top_k, groups, top_groups,
                                         renormalize, seed):
    """Logits of four values (0, 0.5, 1, 1.5: exact in every dtype, distinct scores far apart)
    so that most tokens have equal values at the top-k boundary and inside the top k (counted:
    at least 1 in 8 tokens each), one token all equal. topk_softmax (moe_topk for the grouped
    sigmoid) against torch.topk of torch's scores on the same GPU: the same experts, the same
    values in order, equal values by ascending index; weights within 1e-5 of torch's."""
    if torch.version.hip is not None:
        pytest.skip("torch.topk's choice among equal values was read from its CUDA path; ROCm "
                    "builds take another")
    tokens = 257
    logits = (torch.randint(0, 4, (tokens, experts), device=DEVICE) * 0.5).to(dtype)
    logits[0] = 0.5
    weights = poisoned((tokens, top_k), torch.float32)
    ids = torch.full((tokens, top_k), -7, dtype=torch.int32, device=DEVICE)
    if groups == 1 and scoring == "softmax":
        ops.topk_softmax(logits, top_k, renormalize, out=(weights, ids))
        scores = torch.softmax(logits.float(), dim=-1)
    else:
        ops.moe_topk(logits, top_k, scoring=scoring, groups=groups, top_groups=top_groups,
                     renormalize=renormalize, out=(weights, ids))
        scores = torch.sigmoid(logits.float())
    ranked = scores
    if groups > 1:  # torch.topk picks the groups too, equal bests to the lower group
        chosen = scores.reshape(tokens, groups, -1).amax(dim=-1).topk(top_groups, dim=-1).indices
        allowed = torch.zeros(tokens, groups, dtype=torch.bool, device=DEVICE)
        allowed.scatter_(1, chosen, True)
        ranked = scores.masked_fill(~allowed.repeat_interleave(experts // groups, dim=1),
                                    float("-inf"))
    torch_values, torch_ids = ranked.topk(top_k, dim=-1)
    repeatable = torch.equal(torch_ids, ranked.topk(top_k, dim=-1).indices)  # said, not held
    by_index = torch.sort(-ranked, dim=-1, stable=True).indices[:, :top_k]  # the lower-index rule
    descending = -torch.sort(-ranked, dim=-1).values
    boundary_ties = int((descending[:, top_k - 1] == descending[:, top_k]).sum())
    inner_ties = int((descending[:, :top_k - 1] == descending[:, 1:top_k]).any(dim=-1).sum())
    assert boundary_ties >= tokens // 8 and inner_ties >= tokens // 8, (boundary_ties, inner_ties)

    got = ids.long()
    what = f"{scoring} {dtype} {experts} experts top {top_k}"
    for name, bad, expected in [
        ("the set torch.topk chooses",
         ~(got.sort(dim=-1).values == torch_ids.sort(dim=-1).values).all(dim=-1), torch_ids),
        ("the values in torch.topk's order",
         ~(ranked.gather(1, got.clamp(0, experts - 1)) == torch_values).all(dim=-1), torch_ids),
        ("equal values by ascending index", ~(got == by_index).all(dim=-1), by_index),
    ]:
        if bad.any():
            t = int(bad.nonzero()[0])
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {tokens} tokens differ from {name}; the first, "
                f"token {t}: kjit {ids[t].tolist()}, expected {expected[t].tolist()}, torch.topk "
                f"{torch_ids[t].tolist()}, logits {logits[t].float().tolist()} (seed {seed})")
    expected = ranked.gather(1, got)
    if renormalize:
        expected = expected / expected.sum(dim=-1, keepdim=True)
    check_within(what + " weights", weights, expected.double(), 1e-5, seed)
    reordered = int((~(torch_ids == by_index).all(dim=-1)).sum())
    if reordered:
        warnings.warn(f"{what}: torch.topk ordered equal values inside the top {top_k} other than "
                      f"by index in {reordered} of {tokens} tokens (its bitonic sort is not "
                      f"stable; the same again on the same input: {repeatable}); kjit orders "
                      "them by index and chose the same experts")


# ---- FP8: realistic scale ranges --------------------------------------------------------------
#
# test_gpu_attention_moe.py's FP8 tests use N(0, 0.02) weights (block scales all near 2e-4) and
# N(0, 1) activations, gemm_fp8 scales of 1e-5 .. 1e-3 at k = 512. These add weight block scales
# spread over three orders of magnitude (1e-6 .. 1e-3 around 3e-5: the outputs of fused_moe_fp8
# stay within float16 with outlier channels), activations with outlier channels (their 1 x 128
# block scales from about 5e-3 to about 0.5) and DeepSeek-V3's K.

FP8_LAYERS = {  # (experts, top_k, hidden, inter): the C++ FP8 tests' smaller layers
    "Mixtral-like": (8, 2, 1024, 3584),
    "fine-grained": (64, 6, 1024, 256),
}
WEIGHT_CENTER, WEIGHT_DECADES = 3e-5, 3.0


def fp8_layer(name):
    """An FP8 layer's (w13 codes, w13 scales, w13 values), (w2 ...): fp8_weights with 128 x 128
    blocks, the scales' center set so that each GEMM's output is of about unit size on unit
    inputs (w2's by sqrt(hidden / inter))."""
    def make():
        experts, _, hidden, inter = FP8_LAYERS[name]
        g = generator(f"fp8 {name}")
        w13 = fp8_weights((experts, 2 * inter, hidden), (128, 128), WEIGHT_CENTER,
                          WEIGHT_DECADES, g)
        w2 = fp8_weights((experts, hidden, inter), (128, 128),
                         WEIGHT_CENTER * (hidden / inter) ** 0.5, WEIGHT_DECADES, g)
        return w13, w2
    return held(("fp8", name), make)


FP8_CASES = [pytest.param(layer, dtype, tokens,
                          id=f"{layer}-{str(dtype).split('.')[-1]}-{tokens}")
             for layer, counts in [("Mixtral-like", [1, 37, 300]), ("fine-grained", [1, 100, 777])]
             for dtype, chosen in [(torch.bfloat16, counts), (torch.float16, counts[-1:])]
             for tokens in chosen]


@gpu
@pytest.mark.parametrize("layer, dtype, tokens", FP8_CASES)
def test_fused_moe_fp8_with_spread_scales_and_outliers_against_torch(layer, dtype, tokens, seed):
    """fused_moe_fp8 on weights whose block scales span three orders of magnitude and
    activations with outlier channels, random top-k routing, into a NaN-poisoned output, against
    float64 from x quantised as the device quantises it (quantize_rows) and the weights' exact
    values. The device's further error is the gated intermediate's rounding to the dtype and
    its e4m3 quantisation per 1 x 128 block: at most 2^-4 of each |gated_j| where normal, half
    the subnormal step (2^-10 of the block's scale) below, so element-wise within
    (2^-4 + 2 eps) * magnitude + floor + eps * |out| (the existing test's bound plus the
    subnormal floor that spread scales reach). As that grows with the sum of |terms|, the RMS
    error is also held within 1/16 of the outputs' RMS overall (e4m3's errors are of random
    sign, about 2^-4 / sqrt(3) relative: 1.7 times room, the existing test's) and 1/8 per token
    (a token computed wrongly)."""
    require_sm90a("fused_moe_fp8")
    experts, top_k, hidden, inter = FP8_LAYERS[layer]
    (w13, s13, v13), (w2, s2, v2) = fp8_layer(layer)
    assert spread(s13) > 300 and spread(s2) > 300  # three decades, nearly all used
    x = activations_with_outliers(tokens, hidden).to(dtype)
    ids = torch.rand(tokens, experts, device=DEVICE).argsort(dim=1)[:, :top_k].int().contiguous()
    weights = torch.rand(tokens, top_k, device=DEVICE)
    out = poisoned(x.shape, dtype)
    assert ops.fused_moe_fp8(x, weights, ids, w13, w2, s13, s2, out=out) is out
    what = f"fused_moe_fp8 {layer} {dtype} {tokens} tokens"
    check_no_poison(what, out, seed)
    _, x_scales, x_values = quantize_rows(x.float(), 128)
    expected, magnitude, floor = reference_moe(x_values, weights, ids, v13, v2, quantized=True)
    eps = torch.finfo(dtype).eps
    check_within(what, out, expected, (2 ** -4 + 2 * eps) * magnitude + floor +
                 eps * expected.abs(), seed)
    error_rms = (out.double() - expected).pow(2).mean().sqrt().item()
    out_rms = expected.pow(2).mean().sqrt().item()
    assert error_rms <= out_rms / 16, (what, error_rms, out_rms, seed)
    check_rms_per_row(what, out, expected, 1 / 8, seed)


# (m, n, k): DeepSeek-V3's K of 7168 (its hidden size) with its projections' N (2112: 16.5
# blocks, the last partial; 576; 1536), and a long N at a shorter K; m ragged.
GEMM_FP8_SHAPES = [(1, 2112, 7168), (37, 576, 7168), (300, 1536, 7168), (129, 7168, 2048)]


@gpu
@pytest.mark.parametrize("scaling", ["block", "row"])
@pytest.mark.parametrize("m, n, k", GEMM_FP8_SHAPES)
def test_gemm_fp8_with_spread_scales_and_outliers_against_torch(scaling, m, n, k, seed):
    """gemm_fp8 with activations with outlier channels quantised as a model quantises them (per
    1 x 128 block, DeepSeek-V3's, or per row, torch._scaled_mm's row-wise) and weights whose
    block (row) scales span three orders of magnitude, into a NaN-poisoned bfloat16 output,
    against the float64 product of the values the codes and scales hold. Element-wise within
    2^-9 of the products' magnitudes plus 2^-7 of the result (the existing test's and the C++
    test's: the tensor cores' fp8 sums keep fewer bits than float's; bfloat16's rounding is
    2^-8 relative at most). Each row's RMS error within 2^-7 of its result's RMS with block
    scales (each 128 of K is summed on the tensor cores and promoted to float: the error is
    bfloat16's rounding, about 2^-8 / sqrt(3), four times room), 2^-5 row-wise (the whole K
    summed on the tensor cores, whose fp8 accumulation DeepSeek-V3's report measured near 2%
    at K = 4096 at worst)."""
    require_sm90a("gemm_fp8")
    x = activations_with_outliers(m, k)
    g = generator(f"gemm_fp8 {scaling} {n} {k}")
    if scaling == "block":
        a, scale_a, a_values = quantize_rows(x, 128)
        w, scale_w, w_values = fp8_weights((n, k), (128, 128), WEIGHT_CENTER, WEIGHT_DECADES, g)
        scale_b = scale_w
        if m > 1:
            assert spread(scale_a) > 10  # outlier blocks against the others
    else:
        a, scale_a, a_values = quantize_rows(x, k)
        w, scale_w, w_values = fp8_weights((n, k), (1, k), WEIGHT_CENTER, WEIGHT_DECADES, g)
        scale_b = scale_w.reshape(1, n)
    assert spread(scale_w) > 100
    exact = a_values @ w_values.T
    sizes = a_values.abs() @ w_values.abs().T
    out = poisoned((m, n), torch.bfloat16)
    assert ops.gemm_fp8(a, w.t(), scale_a, scale_b, out=out) is out
    what = f"gemm_fp8 {scaling} {m} x {n} x {k}"
    check_no_poison(what, out, seed)
    check_within(what, out, exact, 2 ** -9 * sizes + 2 ** -7 * exact.abs(), seed)
    check_rms_per_row(what, out, exact, 2 ** -7 if scaling == "block" else 2 ** -5, seed)


# ---- linear -----------------------------------------------------------------------------------

LINEAR_WEIGHTS = [(4096, 4096), (14336, 4096), (8192, 8192)]  # (n, k): weight [n, k]
LINEAR_CASES = [pytest.param(dtype, n, k, m, id=f"{str(dtype).split('.')[-1]}-{n}x{k}-m{m}")
                for dtype in HALF_DTYPES for n, k in LINEAR_WEIGHTS
                for m in [1, 2, 4, 8, 16, 32, 64, 128]]


def linear_weight(n, k, dtype):
    """A weight [n, k] ~ N(0, 1 / k) in dtype (outputs of about unit size), and its values in
    float64 (kept: 8192 x 8192 is 0.5 GB)."""
    def make():
        w = (torch.randn(n, k, generator=generator(f"linear {n} {k} {dtype}"), device=DEVICE) /
             k ** 0.5).to(dtype)
        return w, w.double()
    return held(("linear", n, k, dtype), make)


@gpu
@pytest.mark.parametrize("dtype, n, k, m", LINEAR_CASES)
def test_linear_against_torch(dtype, n, k, m, seed):
    """linear(x [m, k], weight [n, k]) into a NaN-poisoned output against float64 x @ w^T, at the
    row counts each of its kernels takes (linear_skinny, linear_splitk, gemm_wgmma). Element-wise
    within k * 2^-22 * (|x| @ |w|^T) + eps * |ref| (gemm_check_torch.py's: products of 16-bit
    values are exact in float32, any order of float32 sums is within k 2^-24 of their sum of
    |products|, one rounding to the dtype within eps / 2; both doubled), and each row's RMS error
    within eps of its reference's RMS (the one rounding is about eps / 4 in RMS: four times
    room; the element-wise bound is sqrt(k) times looser)."""
    require_sm80("linear")
    w, w64 = linear_weight(n, k, dtype)
    x = torch.randn(m, k, device=DEVICE).to(dtype)
    out = poisoned((m, n), dtype)
    assert ops.linear(x, w, out=out) is out
    what = f"linear {dtype} {m} x {n} x {k}"
    check_no_poison(what, out, seed)
    x64 = x.double()
    expected = x64 @ w64.T
    sizes = x64.abs() @ w64.abs().T
    eps = torch.finfo(dtype).eps
    check_within(what, out, expected, k * 2 ** -22 * sizes + eps * expected.abs(), seed)
    check_rms_per_row(what, out, expected, eps, seed)


# ---- this file's references, on the CPU -------------------------------------------------------


def test_reference_moe_matches_a_loop_over_tokens_and_slots_on_cpu():
    """reference_moe (expert by expert, index_add_) against a plain loop over tokens and slots,
    with slots routed nowhere, an expert without tokens and repeated experts across tokens."""
    g = torch.Generator().manual_seed(1)
    experts, hidden, inter, tokens, top_k = 4, 16, 128, 6, 2
    x = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16)
    w13 = torch.randn(experts, 2 * inter, hidden, generator=g).to(torch.bfloat16)
    w2 = torch.randn(experts, hidden, inter, generator=g).to(torch.bfloat16)
    ids = torch.tensor([[0, 1], [1, 0], [2, -1], [-1, -1], [1, 2], [0, 2]], dtype=torch.int32)
    weights = torch.rand(tokens, top_k, generator=g)
    out, magnitude, floor = reference_moe(x, weights, ids, w13, w2, quantized=True)
    for t in range(tokens):
        row, size, least = (torch.zeros(hidden, dtype=torch.float64) for _ in range(3))
        for s in range(top_k):
            e = int(ids[t, s])
            if e < 0:
                continue
            gate = w13[e, :inter].double() @ x[t].double()
            up = w13[e, inter:].double() @ x[t].double()
            gated = gate / (1 + torch.exp(-gate)) * up
            weight = float(weights[t, s])
            row += weight * (w2[e].double() @ gated)
            size += abs(weight) * (w2[e].double().abs() @ gated.abs())
            least += abs(weight) * w2[e].double().abs().sum(dim=1) * (
                1.25 * 2.0 ** -10 / 448 * float(gated.abs().max()))
        assert torch.allclose(out[t], row, rtol=1e-12, atol=1e-12), t
        assert torch.allclose(magnitude[t], size, rtol=1e-12, atol=1e-12), t
        assert torch.allclose(floor[t], least, rtol=1e-12, atol=1e-15), t
    assert torch.equal(out[3], torch.zeros(hidden, dtype=torch.float64))


def test_deepseek_v3_routing_matches_a_loop_on_cpu():
    """deepseek_v3_routing against a plain loop of sorted lists per token, on logits of few
    values (ties everywhere: the lower index first, groups too) and on continuous ones, and its
    margins: zero where the reference met a tie."""
    g = torch.Generator().manual_seed(2)
    tokens, experts, top_k, groups, top_groups, scale = 40, 32, 4, 4, 2, 2.5
    for logits, bias in [
        ((torch.randint(0, 3, (tokens, experts), generator=g) * 0.5).float(),
         (torch.randint(0, 2, (experts,), generator=g) * 0.25).float()),
        (torch.randn(tokens, experts, generator=g), torch.randn(experts, generator=g) * 0.1),
    ]:
        ids, weights, (group_margin, choice_margin, order_margin) = deepseek_v3_routing(
            logits, bias, top_k, groups, top_groups, scale)
        for t in range(tokens):
            score = [1 / (1 + math.exp(-float(v))) for v in logits[t].double()]
            choice = [score[e] + float(bias[e]) for e in range(experts)]
            size = experts // groups
            rank = [sum(sorted(choice[g0 * size:(g0 + 1) * size], reverse=True)[:2])
                    for g0 in range(groups)]
            chosen = sorted(range(groups), key=lambda g0: (-rank[g0], g0))[:top_groups]
            order = sorted((e for e in range(experts) if e // size in chosen),
                           key=lambda e: (-choice[e], e))[:top_k]
            assert ids[t].tolist() == order, t
            total = sum(score[e] for e in order)
            assert torch.allclose(weights[t], torch.tensor([score[e] / total * scale
                                                            for e in order],
                                                           dtype=torch.float64)), t
        assert bool((group_margin >= 0).all() and (choice_margin >= 0).all() and
                    (order_margin >= 0).all())
    tied = (torch.zeros(1, experts), torch.zeros(experts))
    ids, _, margins = deepseek_v3_routing(*tied, top_k, groups, top_groups, scale)
    assert ids[0].tolist() == list(range(top_k)) and all(float(m[0]) == 0 for m in margins)


def test_e4m3_encoding_rounds_to_nearest_even_and_saturates_on_cpu():
    """encode_e4m3 against a search of the 126 positive finite codes (nearest; of two equally
    near, the even code) on random values over e4m3's range and beyond, every midpoint between
    neighbouring codes and the values next to them, zeros and signs; and, where torch has
    float8_e4m3fn, against torch's conversion (non-saturating: inside +-448 only)."""
    g = torch.Generator().manual_seed(3)
    positive = E4M3_VALUES[:127]
    midpoints = ((positive[:-1] + positive[1:]) / 2).float()
    random = torch.pow(2.0, torch.rand(20000, generator=g) * 22 - 13)  # 2^-13 .. 2^9
    x = torch.cat([random, midpoints, torch.nextafter(midpoints, torch.zeros(1)),
                   torch.nextafter(midpoints, torch.full((1,), 1000.0)), positive.float(),
                   torch.tensor([0.0, 448.0, 464.0, 480.0, 1e6])]).float()
    x = torch.cat([x, -x])
    codes = encode_e4m3(x)
    distance = (x.double().abs().clamp(max=448)[:, None] - positive[None, :]).abs()
    nearest = distance.min(dim=1, keepdim=True).values
    candidates = (distance == nearest) * torch.arange(127) + (distance != nearest) * 1000
    even = torch.where(candidates % 2 == 0, candidates, torch.full_like(candidates, 1000))
    expected = torch.where(even.min(dim=1).values < 1000, even.min(dim=1).values,
                           candidates.min(dim=1).values)
    expected = expected + 128 * torch.signbit(x).long()
    bad = codes.long() != expected
    assert not bad.any(), (x[bad][:5].tolist(), codes[bad][:5].tolist(), expected[bad][:5].tolist())
    assert torch.equal(e4m3_values(codes).abs(), positive[expected % 128])
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None:
        inside = x.abs() <= 448
        assert torch.equal(codes[inside], x[inside].to(fp8).view(torch.uint8))
