"""skinny7: which kernels F.linear and kjit.ops.linear launch at 64 and 128 rows, one call each
(run under ncu), then under torch.profiler: names, grid, block, shared memory, durations and the
gaps between back-to-back kernels, eager and from a CUDA graph."""
import json, os, sys, statistics
import torch
import torch.nn.functional as F
import kjit.ops as K

mode = sys.argv[1]
shapes = [(4096, 4096, 128), (4096, 4096, 64), (8192, 8192, 128), (14336, 4096, 128)]
if mode == "ncu":
    for k, n, m in shapes:
        for dtype in (torch.bfloat16,) if (k, m) != (4096, 128) else (torch.bfloat16, torch.float16):
            w = torch.randn(n, k, device="cuda", dtype=dtype)
            x = torch.randn(m, k, device="cuda", dtype=dtype)
            K.linear(x, w)  # compile before the profiled calls
            torch.cuda.synchronize()
            for who, f in (("torch", F.linear), ("kjit", K.linear)):
                torch.cuda.nvtx.range_push(f"{who} {k}x{n} m{m} {dtype}")
                f(x, w)
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
    sys.exit(0)

from torch.profiler import profile, ProfilerActivity
k, n = 4096, 4096
for m in (128, 64):
    dtype = torch.bfloat16
    copies = 10
    ws = [torch.randn(n, k, device="cuda", dtype=dtype) for _ in range(copies)]
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    for who, f in (("torch", F.linear), ("kjit", K.linear)):
        f(x, ws[0]); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph(); s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for i in range(40):
                    f(x, ws[i % copies])
        torch.cuda.synchronize()
        for how in ("eager", "graph"):
            for _ in range(2):
                if how == "graph": g.replay()
                else:
                    for i in range(40): f(x, ws[i % copies])
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                if how == "graph": g.replay()
                else:
                    for i in range(40): f(x, ws[i % copies])
                torch.cuda.synchronize()
            path = f"/tmp/trace-{who}-{how}-{m}.json"
            prof.export_chrome_trace(path)
            ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
            ev.sort(key=lambda e: e["ts"])
            names = sorted({e["name"] for e in ev})
            durs = [e["dur"] for e in ev]
            gaps = [ev[i + 1]["ts"] - (ev[i]["ts"] + ev[i]["dur"]) for i in range(len(ev) - 1)]
            span = (ev[-1]["ts"] + ev[-1]["dur"] - ev[0]["ts"]) / len(ev)
            a = ev[len(ev) // 2].get("args", {})
            print(f"{who} {how} m={m}: {len(ev)} kernels, span/kernel {span:.2f} us, dur median "
                  f"{statistics.median(durs):.2f} min {min(durs):.2f} max {max(durs):.2f}, gap median "
                  f"{statistics.median(gaps):.2f} min {min(gaps):.2f}")
            print(f"   names {names}")
            print(f"   args {{{', '.join(f'{kk}: {a[kk]}' for kk in a if kk in ('grid','block','shared memory','registers per thread','est. achieved occupancy %','blocks per SM','warps per SM'))}}}")
