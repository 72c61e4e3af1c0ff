"""s34 diagnostic: under the 700 W cap, does a GEMM on zero rows cost less time? kjit's dense
gate-up and down GEMMs of the fine-grained layer on random rows, on the same with rows zeroed as
fused_moe's padding would be (the last 18 of each 128: 14%), with 50% rows zeroed, and all zero.
Warm 3 s, then alternate bursts, 25 cycles; median per variant."""
import sys, time, statistics
sys.path.insert(0, "bench/python")
from gemm_torch import cuda_torch
torch = cuda_torch()
import kjit.ops as kjit_ops
pairs, hidden, inter = 4096 * 6, 2048, 1408
w13 = torch.empty(2 * inter, hidden, device="cuda", dtype=torch.bfloat16).uniform_(-hidden**-0.5, hidden**-0.5)
w2 = torch.empty(hidden, inter, device="cuda", dtype=torch.bfloat16).uniform_(-inter**-0.5, inter**-0.5)
def variants(k):
    a = torch.empty(pairs, k, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
    rows = torch.arange(pairs, device="cuda")
    pad14 = a.clone(); pad14[(rows % 128) >= 110] = 0
    half = a.clone(); half[(rows % 128) >= 64] = 0
    zero = torch.zeros_like(a)
    return {"random": a, "pad14": pad14, "half": half, "zero": zero}
A, H = variants(hidden), variants(inter)
def burst(fn, calls=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls): fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) / calls
runs = {}
for name in A:
    runs["gate-up " + name] = (lambda a=A[name]: kjit_ops.linear(a, w13))
    runs["down " + name] = (lambda h=H[name]: kjit_ops.linear(h, w2))
t0 = time.time()
while time.time() - t0 < 6:
    burst(runs["gate-up random"])
samples = {k: [] for k in runs}
for _ in range(120):
    for k, fn in runs.items():
        samples[k].append(burst(fn))
for k, v in samples.items():
    print(f"{k:16s} median {statistics.median(v):.4f} ms  min {min(v):.4f}  max {max(v):.4f}")
