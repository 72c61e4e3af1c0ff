"""Host time per call from Python of kjit.ops.paged_attention_decode, reshape_and_cache and
gemm_fp8 (issues 27 and 28's Python ops), at decode shapes small enough that the host, not the
GPU, sets the pace: each operator eager with out= and allocating, through torch's dispatcher
(torch.ops.kjit, the path torch.compile's graphs take), the C operator alone (kjit's packed C call
with its arguments prepared once: no checks, no allocation), and torch's nearest op on the same
data (scaled_dot_product_attention over the context gathered contiguous, index_put_ into the
cache, torch._scaled_mm). Method as kjit_python_launch.py: bursts of 128 calls onto an idle
device, the ways interleaved burst by burst, the median over the bursts (host time: a burst does
not wait for the GPU).

    python3 bench/python/ops_host_paged_fp8.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kjit_python_launch  # noqa: E402  (its path setup finds kjit)
from kjit_python_launch import interleaved  # noqa: E402

# Fewer bursts than the launch benchmark's 500 (KJIT_BENCH_BURSTS): five operators' sections fit
# one device call.
kjit_python_launch.BURSTS = int(os.environ.get("KJIT_BENCH_BURSTS", 200))

import kjit.ops as ops  # noqa: E402

DEVICE = "cuda"


def packed_call(function, *args):
    """The C operator `function` with `args` prepared once, as kjit.ops launches it."""
    call = ops._operators.get(function) or ops._operators.setdefault(
        function, ops._make_operator(function))
    return lambda: call(*args, grid=1, block=1)


def decode_ways():
    batch, q_heads, kv_heads, head_dim, page, context = 1, 32, 8, 128, 16, 512
    blocks = batch * context // page
    q = torch.randn(batch, q_heads, head_dim, device=DEVICE, dtype=torch.bfloat16)
    k_cache = torch.randn(blocks, page, kv_heads, head_dim, device=DEVICE, dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    tables = torch.randperm(blocks, device=DEVICE).int().view(batch, -1).contiguous()
    lens = torch.full((batch,), context, dtype=torch.int32, device=DEVICE)
    out = torch.empty_like(q)
    scale = head_dim ** -0.5
    ops.paged_attention_decode(q, k_cache, v_cache, tables, lens, out=out)  # sizes the workspace
    size = ops._decode_workspace[(q_heads, blocks, page, kv_heads, head_dim, 0, batch,
                                  tables.shape[1], 0)]
    workspace = torch.empty(max(size, 1), dtype=torch.uint8, device=DEVICE)
    # torch's decode on the same context gathered contiguous: [batch, heads, tokens, head_dim].
    k = k_cache[tables.long()].reshape(batch, context, kv_heads, head_dim).transpose(1, 2)
    v = v_cache[tables.long()].reshape(batch, context, kv_heads, head_dim).transpose(1, 2)
    k, v = k.contiguous(), v.contiguous()
    q4 = q.view(batch, q_heads, 1, head_dim)
    args = (q, k_cache, v_cache, tables, lens, scale, 0, 1.0, 1.0, False)
    return {
        "kjit.ops.paged_attention_decode(out=)": lambda: ops.paged_attention_decode(
            q, k_cache, v_cache, tables, lens, out=out),
        "kjit.ops.paged_attention_decode": lambda: ops.paged_attention_decode(
            q, k_cache, v_cache, tables, lens),
        "torch.ops.kjit.paged_attention_decode_out":
            lambda: torch.ops.kjit.paged_attention_decode_out(out, *args),
        "C operator alone (packed)": packed_call(
            "paged_attention_decode", 2, out.data_ptr(), q.data_ptr(), q_heads, k_cache.data_ptr(),
            v_cache.data_ptr(), blocks, page, kv_heads, head_dim, 0, 1.0, 1.0, tables.data_ptr(),
            lens.data_ptr(), batch, tables.shape[1], 0, 0, scale,
            workspace.data_ptr() if size else 0, size),
        "torch SDPA (GQA, contiguous KV)": lambda: F.scaled_dot_product_attention(
            q4, k, v, scale=scale, enable_gqa=True),
    }


def cache_ways():
    tokens, kv_heads, head_dim, page, blocks = 64, 8, 128, 16, 64
    key = torch.randn(tokens, kv_heads, head_dim, device=DEVICE, dtype=torch.bfloat16)
    value = torch.randn_like(key)
    k_cache = torch.zeros(blocks, page, kv_heads, head_dim, device=DEVICE, dtype=torch.bfloat16)
    v_cache = torch.zeros_like(k_cache)
    slots = torch.randperm(blocks * page, device=DEVICE)[:tokens].contiguous()
    k_rows, v_rows = k_cache.view(-1, kv_heads, head_dim), v_cache.view(-1, kv_heads, head_dim)

    def torch_write():
        k_rows.index_put_((slots,), key)
        v_rows.index_put_((slots,), value)
    return {
        "kjit.ops.reshape_and_cache": lambda: ops.reshape_and_cache(key, value, k_cache, v_cache,
                                                                    slots),
        "torch.ops.kjit.reshape_and_cache": lambda: torch.ops.kjit.reshape_and_cache(
            key, value, k_cache, v_cache, slots, 1.0, 1.0, None, None, True),
        "C operator alone (packed)": packed_call(
            "reshape_and_cache", 2, key.data_ptr(), value.data_ptr(), k_cache.data_ptr(),
            v_cache.data_ptr(), blocks, page, kv_heads, head_dim, 0, 1.0, 1.0, slots.data_ptr(),
            tokens, 0, 0, 0, 0, 0, 0, 0),
        "torch index_put_ (k and v)": torch_write,
    }


def gemm_ways(scaling):
    m, n, k = 16, 4096, 4096
    a = (torch.rand(m, k, device=DEVICE) * 2 - 1).to(torch.float8_e4m3fn)
    w = (torch.rand(n, k, device=DEVICE) * 2 - 1).to(torch.float8_e4m3fn)
    shapes = {"per-tensor": ((), ()), "row-wise": ((m, 1), (1, n)),
              "block": ((m, k // 128), (n // 128, k // 128))}[scaling]
    scale_a, scale_b = torch.ones(shapes[0], device=DEVICE), torch.ones(shapes[1], device=DEVICE)
    out = torch.empty(m, n, device=DEVICE, dtype=torch.bfloat16)
    rows_a, rows_b = ops._scale_shape(scale_a), ops._scale_shape(scale_b)
    function = "gemm_fp8_blockscale" if scaling == "block" else "gemm_fp8_scaled"
    ways = {
        f"kjit.ops.gemm_fp8(out=), {scaling}": lambda: ops.gemm_fp8(a, w.t(), scale_a, scale_b,
                                                                    out=out),
        f"kjit.ops.gemm_fp8, {scaling}": lambda: ops.gemm_fp8(a, w.t(), scale_a, scale_b),
        "torch.ops.kjit.gemm_fp8_out": lambda: torch.ops.kjit.gemm_fp8_out(out, a, w.t(), scale_a,
                                                                           scale_b),
        "C operator alone (packed)": packed_call(
            function, out.data_ptr(), a.data_ptr(), scale_a.data_ptr(), *rows_a, w.data_ptr(),
            scale_b.data_ptr(), *rows_b, m, n, k),
    }
    if scaling != "block":
        ways["torch._scaled_mm"] = lambda: torch._scaled_mm(a, w.t(), scale_a, scale_b,
                                                            out_dtype=torch.bfloat16)
    return ways


if __name__ == "__main__":
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"Python {sys.version.split()[0]}")
    sections = [("paged decode, batch 1 x 512, GQA 32/8, head_dim 128, bf16, page 16",
                 decode_ways)]
    sections.append(("reshape_and_cache, 64 tokens, 8 kv heads x 128, bf16", cache_ways))
    if torch.cuda.get_device_capability() >= (9, 0):
        for scaling in ("per-tensor", "row-wise", "block"):
            sections.append((f"gemm_fp8 {scaling}, 16 x 4096 x 4096", lambda s=scaling:
                             gemm_ways(s)))
    for title, make in sections:
        try:
            results = interleaved(make())
        except Exception as error:  # noqa: a failure is reported, the other sections still run
            print(f"\n{title}: not measured: {type(error).__name__}: {str(error)[:300]}")
            continue
        floor = results["C operator alone (packed)"]
        print(f"\n{title:60s} {'us/call':>8s} {'- C op':>8s}")
        for name, us in results.items():
            print(f"  {name:58s} {us:8.2f} {us - floor:+8.2f}")
