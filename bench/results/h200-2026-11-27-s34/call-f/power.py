"""s34 diagnostic: the fine-grained layer's steady ratio to dense under the power cap, and the
power a DRAM copy draws (its energy per byte), with wall-clock marks for nvidia-smi's log."""
import sys, time, statistics, datetime
sys.path.insert(0, "bench/python")
from gemm_torch import cuda_torch
from moe_grouped_mm import Layer, grouped_mm_of
torch = cuda_torch()
import kjit.ops as kjit_ops
def mark(what):
    print(f"{datetime.datetime.now().strftime('%H:%M:%S.%f')[:-3]} {what}", flush=True)
def burst(fn, calls=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls): fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) / calls
dtype = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "bfloat16")
print("type", dtype)
layer = Layer(torch, grouped_mm_of(torch), 64, 6, 2048, 1408, dtype)
print("misses:", layer.misses(kjit_ops))
fused = lambda: layer.kjit_layer(kjit_ops)
dense = lambda: (layer.kjit_dense_gate_up(kjit_ops), layer.kjit_dense_down(kjit_ops))
tdense = lambda: (layer.torch_dense_gate_up(), layer.torch_dense_down())
for phase, fn in (("fused alone", fused), ("kjit dense alone", dense)):
    time.sleep(3)
    mark(phase + " start")
    v = [burst(fn) for _ in range(300)]
    mark(phase + f" end: first 10 bursts {statistics.median(v[:10]):.3f} ms, last 100 {statistics.median(v[-100:]):.3f} ms")
time.sleep(3)
mark("alternating start")
f, d, t = [], [], []
for _ in range(100):
    f.append(burst(fused)); d.append(burst(dense)); t.append(burst(tdense))
mark("alternating end")
fm, dm, tm = statistics.median(f[20:]), statistics.median(d[20:]), statistics.median(t[20:])
print(f"steady (cycles 20-99): fused {fm:.3f} ms, kjit dense {dm:.3f} ms ({dm/fm:.3f}), torch dense {tm:.3f} ms ({tm/fm:.3f})")
time.sleep(3)
n = 1 << 30
src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(); dst = torch.empty_like(src)
mark("copy start")
v = [burst(lambda: dst.copy_(src), 10) for _ in range(500)]
mark("copy end")
ms = statistics.median(v[100:])
print(f"copy of 1 GiB: {ms:.3f} ms, {2 * n / ms * 1e-6:.0f} GB/s (read + write)")
mark("idle start")
time.sleep(3)
mark("idle end")
