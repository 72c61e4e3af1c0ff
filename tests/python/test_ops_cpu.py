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
