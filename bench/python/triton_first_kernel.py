"""Triton's disk-cache hit in a fresh process: from process start to its first kernel finished,
minus the driver's initialisation (torch's CUDA init and context), with a warm Triton cache.
The counterpart of kjit_first_kernel. Runs itself once to warm a private cache, then 5 times.

    python3 bench/python/triton_first_kernel.py
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child():
    start = time.perf_counter()
    import torch

    torch.cuda.init()
    x = torch.ones(256, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    driver_ready = time.perf_counter()
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, a, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * a, mask=mask)

    scale[(1,)](x, 2.0, 256, BLOCK=256)
    torch.cuda.synchronize()
    done = time.perf_counter()
    print(f"{(driver_ready - start) * 1e3:.3f} {(done - driver_ready) * 1e3:.3f}", flush=True)


def run_child(env):
    spawned = time.perf_counter()
    process = subprocess.Popen([sys.executable, __file__, "--child"], stdout=subprocess.PIPE,
                               env=env, text=True)
    line = process.stdout.readline()
    reported = time.perf_counter()
    process.wait()
    driver_ms, triton_ms = (float(v) for v in line.split())
    return (reported - spawned) * 1e3, driver_ms, triton_ms


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
        sys.exit(0)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        run_child(env)  # compiles and fills the cache
        runs = [run_child(env) for _ in range(5)]
    wall = statistics.median(r[0] for r in runs)
    driver = statistics.median(r[1] for r in runs)
    minus = statistics.median(r[0] - r[1] for r in runs)
    triton_part = statistics.median(r[2] for r in runs)
    print("triton fresh process, warm cache, median of 5:")
    print(f"  process start to first kernel finished  {wall:8.2f} ms")
    print(f"  of which torch import + driver init     {driver:8.2f} ms")
    print(f"  start to kernel done, minus that        {minus:8.2f} ms")
    print(f"  of which triton (import, cache hit, launch, sync) {triton_part:8.2f} ms")
