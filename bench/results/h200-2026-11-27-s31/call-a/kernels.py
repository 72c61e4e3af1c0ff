"""s31: which kernels F.linear and kjit.ops.linear launch at 128 rows of 8192 x 8192 (torch.profiler:
names, grid, cluster-free launch facts, median device time of 40 back-to-back calls over 10 weights)."""
import json, statistics
import torch
import torch.nn.functional as F
import kjit.ops as K
from torch.profiler import profile, ProfilerActivity

k = n = 8192
for dtype in (torch.bfloat16, torch.float16):
    for m in (64, 128):
        ws = [torch.randn(n, k, device="cuda", dtype=dtype) for _ in range(4)]
        x = torch.randn(m, k, device="cuda", dtype=dtype)
        for who, f in (("torch", F.linear), ("kjit", K.linear)):
            for i in range(8):
                f(x, ws[i % 4])
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for i in range(40):
                    f(x, ws[i % 4])
                torch.cuda.synchronize()
            path = f"/tmp/trace-{who}-{m}.json"
            prof.export_chrome_trace(path)
            ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
            durs = [e["dur"] for e in ev]
            a = ev[len(ev) // 2].get("args", {})
            print(f"{who} {dtype} m={m}: {len(ev)} kernels, dur median {statistics.median(durs):.2f} "
                  f"min {min(durs):.2f} us; {sorted({e['name'][:110] for e in ev})}; "
                  f"grid {a.get('grid')} block {a.get('block')} smem {a.get('shared memory')}")
