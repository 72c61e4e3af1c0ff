"""s34 diagnostic: fused_moe and the dense GEMMs, each in bursts for a while, with the time of
each burst, to see which slows as the card warms (nvidia-smi logs clocks and power beside)."""
import sys, time
sys.path.insert(0, "bench/python")
from gemm_torch import cuda_torch
from moe_grouped_mm import Layer, grouped_mm_of
torch = cuda_torch()
import kjit.ops as kjit_ops
fine = (64, 6, 2048, 1408)
layer = Layer(torch, grouped_mm_of(torch), *fine, torch.bfloat16)
print("misses:", layer.misses(kjit_ops))
ways = {"fused": lambda: layer.kjit_layer(kjit_ops),
        "dense": lambda: (layer.kjit_dense_gate_up(kjit_ops), layer.kjit_dense_down(kjit_ops))}
t0 = time.time()
def burst(fn, calls=30):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls): fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) / calls
for phase in ["fused", "dense", "fused", "alternate", "idle", "fused"]:
    if phase == "idle":
        time.sleep(5); print(f"{time.time()-t0:7.2f} idle 5 s"); continue
    for i in range(60):
        if phase == "alternate":
            a, b = burst(ways["fused"]), burst(ways["dense"])
            print(f"{time.time()-t0:7.2f} alt fused {a:.3f} dense {b:.3f} ratio {b/a:.2f}")
        else:
            print(f"{time.time()-t0:7.2f} {phase} {burst(ways[phase]):.3f}")
