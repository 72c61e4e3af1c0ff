"""torch's side of the wgmma experiment, in the same device call: torch.matmul TFLOP/s for the
square shapes, F.linear (x @ W^T) for the Llama-3-8B projections, and the device-to-device copy
bandwidth (bytes read + written) that skinny GEMMs are measured against. Medians of CUDA events."""
import statistics
import torch
import torch.nn.functional as F


def median_ms(run, reps=20):
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); run(); e.record(); e.synchronize()
        t.append(s.elapsed_time(e))
    return statistics.median(t)


print("torch", torch.__version__, torch.cuda.get_device_name())
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
y = torch.empty_like(x)
ms = median_ms(lambda: y.copy_(x))
print(f"copy {2 * x.numel() / ms / 1e6:.0f} GB/s")
del x, y
for s in (4096, 8192):
    for dt in (torch.bfloat16, torch.float16):
        a = torch.randn(s, s, dtype=dt, device="cuda")
        b = torch.randn(s, s, dtype=dt, device="cuda")
        ms = median_ms(lambda: a @ b)
        msT = median_ms(lambda: F.linear(a, b))
        print(f"torch {dt} {s}^3: matmul {2 * s**3 / ms / 1e9:.1f} TFLOP/s, linear(W^T) {2 * s**3 / msT / 1e9:.1f}")
# The projections rotate over copies of W, at least 256 MiB together, so that L2 serves none of
# them (as kjit's bench does); 20 launches between each pair of events.
for k, n in ((4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)):
    copies = (256 << 20) // (2 * n * k) + 1
    ws = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
    for m in (1, 16, 128, 1024, 8192):
        xx = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        def batch():
            for i in range(20):
                F.linear(xx, ws[i % copies])
        ms = median_ms(batch, reps=10) / 20
        print(f"torch linear bf16 m={m} k={k} n={n}: {ms * 1e3:.1f} us {2 * m * n * k / ms / 1e9:.1f} TFLOP/s weights {2 * n * k / ms / 1e6:.0f} GB/s")
    del ws
