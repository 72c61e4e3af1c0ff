"""kjit from Python on a GPU with torch >= 2.4 (tools/gpu-check --run): every kjit.ops operator
against torch on ragged shapes with poisoned outputs, bad tensors, a user template on torch
tensors, torch.compile(fullgraph=True) of a small block, CUDA-graph capture after a warm-up and
the clear error without one, and two streams. Skipped, with the reason, elsewhere."""

import math
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 4):
    pytest.skip(f"torch {torch.__version__} is older than 2.4", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import kjit  # noqa: E402
import kjit.ops as ops  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 4096), (7, 1000), (33, 5122)]  # ragged: rows and row lengths of no round size
TOLERANCE = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DEVICE = "cuda"


def close(actual, expected, dtype, scale=1.0):
    tolerance = TOLERANCE[dtype] * scale
    torch.testing.assert_close(actual.float(), expected.float(), rtol=tolerance, atol=tolerance)


def poisoned_like(x, shape=None, dtype=None):
    return torch.full(shape or x.shape, float("nan"), dtype=dtype or x.dtype, device=x.device)


def randn(*shape, dtype):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, hidden", SHAPES)
def test_norms_against_torch(dtype, rows, hidden):
    x, w, b = randn(rows, hidden, dtype=dtype), randn(hidden, dtype=dtype), randn(hidden,
                                                                                 dtype=dtype)
    out = poisoned_like(x)
    assert ops.rms_norm(x, w, 1e-6, out=out) is out
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)) * w.float()
    close(out, ref, dtype, 2)
    close(ops.rms_norm(x, w, 1e-6), ref, dtype, 2)
    close(ops.layer_norm(x, w, b, 1e-5),
          F.layer_norm(x.float(), (hidden,), w.float(), b.float(), 1e-5), dtype, 4)
    residual = randn(rows, hidden, dtype=dtype)
    summed = (x.float() + residual.float()).to(dtype)
    x2, r2 = x.clone(), residual.clone()
    assert ops.fused_add_rms_norm(x2, r2, w, 1e-6) is None
    close(r2, summed, dtype)
    close(x2, summed.float() * torch.rsqrt(summed.float().pow(2).mean(-1, keepdim=True) + 1e-6)
          * w.float(), dtype, 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols", SHAPES)
def test_softmax_and_activations_against_torch(dtype, rows, cols):
    x = randn(rows, cols, dtype=dtype)
    out = poisoned_like(x)
    ops.softmax(x, 0.5, out=out)
    close(out, torch.softmax(0.5 * x.float(), -1), dtype)
    for name, ref in [("silu", F.silu), ("gelu", F.gelu),
                      ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")),
                      ("relu", F.relu), ("sigmoid", torch.sigmoid)]:
        out = poisoned_like(x)
        getattr(ops, name)(x, out=out)
        close(out, ref(x.float()), dtype, 2)
    if cols % 2 == 0:
        d = cols // 2
        for name, act in [("silu", F.silu), ("gelu", F.gelu),
                          ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh"))]:
            out = poisoned_like(x, (rows, d))
            getattr(ops, name + "_and_mul")(x, out=out)
            close(out, act(x[:, :d].float()) * x[:, d:].float(), dtype, 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens, q_heads, kv_heads, head_size, rotary_dim, neox", [
    (5, 8, 2, 128, 128, True), (13, 4, 4, 64, 32, False)])
def test_rotary_against_torch(dtype, tokens, q_heads, kv_heads, head_size, rotary_dim, neox):
    max_position = 64
    positions = torch.randint(0, max_position, (tokens,), device=DEVICE)
    cache = randn(max_position, rotary_dim, dtype=dtype)
    query = randn(tokens, q_heads * head_size, dtype=dtype)
    key = randn(tokens, kv_heads * head_size, dtype=dtype)

    def rotate(t, heads):
        t = t.float().view(tokens, heads, head_size).clone()
        cos, sin = cache.float()[positions].chunk(2, dim=-1)
        cos, sin = cos[:, None, :], sin[:, None, :]
        r = t[..., :rotary_dim]
        if neox:
            a, b = r[..., :rotary_dim // 2], r[..., rotary_dim // 2:]
            r = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
        else:
            a, b = r[..., 0::2], r[..., 1::2]
            r = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        t[..., :rotary_dim] = r
        return t.view(tokens, heads * head_size)

    expected_q, expected_k = rotate(query, q_heads), rotate(key, kv_heads)
    ops.rotary_embedding(positions, query, key, cache, head_size, neox)
    close(query, expected_q, dtype, 4)
    close(key, expected_k, dtype, 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, hidden", SHAPES)
def test_quantisation_against_torch(dtype, rows, hidden):
    x = randn(rows, hidden, dtype=dtype)
    values, scales = ops.quant_int8(x)
    expected_scales = x.float().abs().amax(-1) / 127
    close(scales, expected_scales, torch.float32, 10)
    expected = torch.round(x.float() / expected_scales[:, None]).clamp(-128, 127)
    assert (values.float() - expected).abs().max().item() <= 1
    if torch.cuda.get_device_capability() >= (8, 9):
        fp8, fp8_scales = ops.quant_fp8(x)
        close(fp8_scales, x.float().abs().amax(-1) / 448, torch.float32, 10)
        decoded = fp8.view(torch.float8_e4m3fn).float() * fp8_scales[:, None]
        torch.testing.assert_close(decoded, x.float(), rtol=0.07, atol=1e-2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, k", [(1, 4096, 4096), (7, 1000, 520), (130, 264, 4104)])
def test_gemm_and_linear_against_torch(dtype, m, n, k):
    a, b, w = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype), randn(n, k, dtype=dtype)
    def product_close(actual, expected):  # sums of k products: absolute error grows as sqrt(k)
        tolerance = TOLERANCE[dtype]
        torch.testing.assert_close(actual.float(), expected, rtol=tolerance,
                                   atol=tolerance * math.sqrt(k) * 2)

    out = poisoned_like(a, (m, n))
    ops.gemm(a, b, out=out)
    product_close(out, a.float() @ b.float())
    try:
        product_close(ops.linear(a, w), a.float() @ w.float().T)
    except kjit.BadArgument as error:  # linear has no kernel for this shape and type here
        assert "linear" in error.message


def test_bad_tensors_are_bad_argument():
    x = randn(4, 256, dtype=torch.float16)
    w = randn(256, dtype=torch.float16)
    with pytest.raises(kjit.BadArgument, match="x is on cpu"):
        ops.rms_norm(x.cpu(), w)
    with pytest.raises(kjit.BadArgument, match="not contiguous"):
        ops.rms_norm(randn(256, 8, dtype=torch.float16).T, randn(8, dtype=torch.float16))
    with pytest.raises(kjit.BadArgument, match="weight is torch.float32, expected torch.float16"):
        ops.rms_norm(x, w.float())
    with pytest.raises(kjit.BadArgument, match=r"weight has shape \(255,\)"):
        ops.rms_norm(x, w[:255])
    with pytest.raises(kjit.BadArgument, match="expected one of"):
        ops.rms_norm(x.double(), w.double())
    with pytest.raises(kjit.BadArgument, match="out has shape"):
        ops.rms_norm(x, w, out=randn(4, 255, dtype=torch.float16))
    if torch.cuda.device_count() > 1:
        with pytest.raises(kjit.BadArgument, match="cuda:1"):
            ops.rms_norm(x.to("cuda:1"), w)


SCALE = """
template <typename T> __global__ void scale(T* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
}
"""


def test_a_user_template_on_torch_tensors():
    tmpl = kjit.Template("gpu_scale", SCALE, params={"T": ["float", "half", "bfloat16"]},
                         arguments=["T*", "float", "int"], kernel="scale")
    rt = kjit.Runtime()
    for dtype in DTYPES:
        k = rt.kernel(tmpl, {"T": dtype})
        assert rt.kernel(tmpl, {"T": dtype}) is k
        x = randn(1001, dtype=dtype)
        expected = (x.float() * 3).to(dtype)
        k(x, 3.0, x.numel(), grid=(x.numel() + 255) // 256, block=256)
        torch.testing.assert_close(x, expected)
        with pytest.raises(kjit.BadArgument, match="takes 3 arguments, 2 given"):
            k(x, 3.0, grid=1, block=1)
        with pytest.raises(kjit.BadArgument, match="tensor on cpu"):
            k(x.cpu(), 3.0, 4, grid=1, block=1)
        with pytest.raises(kjit.BadArgument, match="argument 2"):
            k(x, 3.0, 2.5, grid=1, block=1)
    # Any object with __cuda_array_interface__ or __dlpack__, and an explicit stream.
    y = torch.ones(64, device=DEVICE)
    k = rt.kernel(tmpl, {"T": "float"})
    stream = torch.cuda.Stream()
    y_view = y.detach()

    class Interface:
        __cuda_array_interface__ = y_view.__cuda_array_interface__

    stream.wait_stream(torch.cuda.current_stream())
    k(Interface(), 2.0, 64, grid=1, block=64, stream=stream)
    k(y_view, 2.0, 64, grid=1, block=64, stream=stream.cuda_stream)
    stream.synchronize()
    torch.testing.assert_close(y, torch.full_like(y, 4.0))


def test_the_c_and_the_ctypes_launch_agree(monkeypatch):
    tmpl = kjit.Template("gpu_scale_paths", SCALE, params={"T": ["float"]},
                         arguments=["T*", "float", "int"], kernel="scale")
    fast = kjit.Runtime().kernel(tmpl, {"T": "float"})
    monkeypatch.setenv("KJIT_PYTHON_FASTLAUNCH", "0")
    slow = kjit.Runtime().kernel(tmpl, {"T": "float"})
    if os.environ.get("KJIT_TEST_EXPECT_FASTLAUNCH") == "1":
        assert fast.launch_path == "C"
    assert slow.launch_path == "ctypes"
    original = randn(1001, dtype=torch.float32)
    x, y = original.clone(), original.clone()
    fast(x, 3.0, 1001, grid=4, block=256)
    slow(y, 3.0, 1001, grid=4, block=256)
    torch.testing.assert_close(x, original * 3)
    torch.testing.assert_close(x, y, rtol=0, atol=0)
    with pytest.raises(kjit.BadArgument, match="tensor on cpu"):
        fast(x.cpu(), 3.0, 4, grid=1, block=1)


def test_a_user_template_as_a_torch_operator_eager_and_compiled():
    tmpl = kjit.Template("gpu_custom", SCALE, params={"T": ["float", "half", "bfloat16"]},
                         arguments=["T*", "float", "int"], kernel="scale")
    scale = ops.custom_op("test_gpu_custom", tmpl, {"T": torch.bfloat16},
                          grid=lambda x, a, n: (n + 255) // 256, block=256)
    assert "Tensor(a!) a0, float a1, int a2" in str(torch.ops.kjit.test_gpu_custom.default._schema)
    x = randn(1001, dtype=torch.bfloat16)
    y = x.clone()
    scale(y, 3.0, y.numel())
    close(y, x * 3, torch.bfloat16)

    def block(x):
        y = x.clone()
        scale(y, 2.0, y.numel())
        return torch.relu(y)

    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True)
    close(compiled(x), torch.relu(x * 2), torch.bfloat16)
    explained = torch._dynamo.explain(block)(x)
    assert explained.graph_break_count == 0, explained.break_reasons


def test_two_streams():
    a, b = randn(64, 4096, dtype=torch.bfloat16), randn(64, 4096, dtype=torch.bfloat16)
    w = randn(4096, dtype=torch.bfloat16)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    s1.wait_stream(torch.cuda.current_stream())
    s2.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s1):
        out_a = ops.rms_norm(a, w)
    with torch.cuda.stream(s2):
        out_b = ops.rms_norm(b, w)
    torch.cuda.synchronize()
    close(out_a, ops.rms_norm(a, w), torch.bfloat16)
    close(out_b, ops.rms_norm(b, w), torch.bfloat16)


class Block(torch.nn.Module):
    """A transformer MLP block: norm, linear, gated activation, linear, residual."""

    def __init__(self, hidden, inner, dtype):
        super().__init__()
        self.norm = torch.nn.Parameter(torch.ones(hidden, device=DEVICE, dtype=dtype))
        self.up = torch.nn.Parameter(randn(2 * inner, hidden, dtype=dtype) / hidden ** 0.5)
        self.down = torch.nn.Parameter(randn(hidden, inner, dtype=dtype) / inner ** 0.5)

    def forward(self, x):
        h = ops.rms_norm(x, self.norm, 1e-6)
        h = ops.silu_and_mul(ops.linear(h, self.up))
        return x + ops.linear(h, self.down)


def test_torch_compile_fullgraph_keeps_the_operators():
    torch._dynamo.reset()
    block = Block(1024, 2048, torch.bfloat16)
    x = randn(8, 1024, dtype=torch.bfloat16)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True)(x)
    close(compiled, eager, torch.bfloat16)
    from torch._dynamo.utils import counters
    assert not counters["graph_break"], dict(counters["graph_break"])


def test_fake_implementations_touch_no_cache(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    def refuse(*args):
        raise AssertionError("a fake implementation reached kjit's library")
    x = randn(3, 512, dtype=torch.float16)
    w = randn(512, dtype=torch.float16)
    b = randn(512, 7, dtype=torch.float16)
    with FakeTensorMode() as mode, monkeypatch.context() as patch:
        patch.setattr(ops, "lib", refuse)  # the operators' only way into the C library
        patch.setattr(kjit._core, "default_runtime", refuse)
        fx, fw, fb = mode.from_tensor(x), mode.from_tensor(w), mode.from_tensor(b)
        out = torch.ops.kjit.rms_norm(fx, fw, 1e-6)
        assert out.shape == (3, 512) and out.dtype == torch.float16
        values, scales = torch.ops.kjit.quant_int8(fx)
        assert values.dtype == torch.int8 and scales.shape == (3,)
        assert torch.ops.kjit.gemm(fx, fb).shape == (3, 7)
    torch.library.opcheck(torch.ops.kjit.rms_norm.default, (x, w, 1e-6))
    torch.library.opcheck(torch.ops.kjit.silu_and_mul.default, (x,))


def test_cuda_graph_after_warmup_and_the_error_without():
    kjit.warmup([{"op": "rms_norm", "dtype": "bfloat16", "shapes": [[5, 2048], [2048]]}])
    x = randn(5, 2048, dtype=torch.bfloat16)
    w = randn(2048, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            ops.rms_norm(x, w, 1e-6, out=out)
    x.copy_(randn(5, 2048, dtype=torch.bfloat16))
    graph.replay()
    torch.cuda.synchronize()
    close(out, ops.rms_norm(x, w, 1e-6), torch.bfloat16)

    # A shape never run in this process: the error names it and the warm-up item.
    y = randn(3, 3072, dtype=torch.bfloat16)
    wy = randn(3072, dtype=torch.bfloat16)
    graph2 = torch.cuda.CUDAGraph()
    with pytest.raises(kjit.BadUsage) as raised:
        with torch.cuda.graph(graph2):
            ops.rms_norm(y, wy, 1e-6)
    message = raised.value.message
    assert "rms_norm" in message and "[3, 3072]" in message and "kjit.warmup" in message
    print("capture error:", message)
    # The same for a user kernel not loaded yet.
    tmpl = kjit.Template("gpu_capture", SCALE, params={"T": ["float"]},
                         arguments=["T*", "float", "int"], kernel="scale")
    rt = kjit.Runtime()
    with pytest.raises(kjit.BadUsage, match="gpu_capture"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            rt.kernel(tmpl, {"T": "float"})
    torch.cuda.synchronize()
    # The process is still healthy: the operator runs after the refused capture.
    close(ops.rms_norm(y, wy, 1e-6), y.float() * torch.rsqrt(
        y.float().pow(2).mean(-1, keepdim=True) + 1e-6) * wy.float(), torch.bfloat16, 2)


def test_the_cache_sees_the_gpu_variants():
    stats = kjit.cache.stats()
    assert stats["counters"], stats
    assert os.environ.get("KJIT_CACHE_DIR", "") in stats["cache_dir"]
