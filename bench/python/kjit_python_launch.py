"""Host time per launch from Python, all in one run on one GPU (issue 24, "Measured"): a held
kjit kernel called on a torch tensor (the stream read from torch, and given), through
kjit._fastlaunch's C where it is found and through ctypes (KJIT_PYTHON_FASTLAUNCH=0),
cuLaunchKernel through ctypes (Python's floor), CuPy's RawKernel and a Triton kernel doing the
same work (scale 256 floats), torch's x.mul_(1.0), and kjit.ops.rms_norm against F.rms_norm at
1 x 4096 bf16; the same through torch.compile(fullgraph=True); then kjit_gpu_bench's C++
launches (raw cuLaunchKernel, a held kjit::Kernel) run in this same call; and the first kernel of
a new process from a warm cache. Each way is timed in
bursts of 128 launches onto an idle device, the ways interleaved burst by burst; the median over
the bursts.

    python3 bench/python/kjit_python_launch.py [PATH/TO/kjit_gpu_bench]
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kjit  # noqa: E402
import kjit.ops  # noqa: E402

BURST, BURSTS = 128, 500
SOURCE = """template <typename T> __global__ void scale(T* x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 256) x[i] = x[i] * a;
}"""


def interleaved(ways):
    samples = {name: [] for name in ways}
    for launch in ways.values():  # warm every path first
        launch()
    torch.cuda.synchronize()
    for _ in range(BURSTS):
        for name, launch in ways.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(BURST):
                launch()
            samples[name].append((time.perf_counter() - start) / BURST * 1e6)
    torch.cuda.synchronize()
    return {name: statistics.median(values) for name, values in samples.items()}


def ways_for_scale():
    x = torch.ones(256, device="cuda")
    tmpl = kjit.Template("bench_scale", SOURCE, params={"T": ["float"]},
                         arguments=["T*", "float"], kernel="scale")
    k = kjit.Runtime().kernel(tmpl, {"T": "float"})
    os.environ["KJIT_PYTHON_FASTLAUNCH"] = "0"  # the same kernel launched through ctypes
    k_ctypes = kjit.Runtime().kernel(tmpl, {"T": "float"})
    del os.environ["KJIT_PYTHON_FASTLAUNCH"]
    path = k.launch_path
    ways = {f"kjit python, {path} (torch stream)": lambda: k(x, 1.0, grid=1, block=256),
            f"kjit python, {path} (stream=0)": lambda: k(x, 1.0, grid=1, block=256, stream=0),
            "kjit python, ctypes (torch stream)": lambda: k_ctypes(x, 1.0, grid=1, block=256),
            "kjit python, ctypes (stream=0)": lambda: k_ctypes(x, 1.0, grid=1, block=256,
                                                               stream=0)}

    # cuLaunchKernel from ctypes on kjit's own function handle: Python's floor.
    cuda = ctypes.CDLL("libcuda.so.1")
    launch = cuda.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    pointer, scale_a = ctypes.c_void_p(x.data_ptr()), ctypes.c_float(1.0)
    args = (ctypes.c_void_p * 2)(ctypes.addressof(pointer), ctypes.addressof(scale_a))
    function = ctypes.c_void_p(k.native_handle)
    # The lambda holds the argument objects: `args` holds only their addresses.
    ways["cuLaunchKernel via ctypes"] = lambda keep=(pointer, scale_a): launch(
        function, 1, 1, 1, 256, 1, 1, 0, None, args, None)
    try:
        import cupy
        kernel = cupy.RawKernel(r'''extern "C" __global__ void scale(float *x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 256) x[i] = x[i] * a;
}''', "scale")
        cx, ca = cupy.asarray(x), cupy.float32(1.0)
        ways["cupy RawKernel"] = lambda: kernel((1,), (256,), (cx, ca))
    except Exception as error:  # noqa: a missing package is reported, not fatal
        print(f"cupy RawKernel not measured: {error}")
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def triton_scale(x_ptr, a, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * a, mask=mask)

        ways["triton"] = lambda: triton_scale[(1,)](x, 1.0, 256, BLOCK=256)
    except Exception as error:  # noqa
        print(f"triton not measured: {error}")
    ways["torch x.mul_(1.0)"] = lambda: x.mul_(1.0)
    return ways


def ways_for_rms_norm():
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    return {"kjit.ops.rms_norm(out=)": lambda: kjit.ops.rms_norm(x, w, 1e-6, out=out),
            "kjit.ops.rms_norm": lambda: kjit.ops.rms_norm(x, w, 1e-6),
            "F.rms_norm": lambda: F.rms_norm(x, (4096,), w, 1e-6)}


def ways_through_compile():
    """The same work inside torch.compile(fullgraph=True) graphs (default inductor backend): the
    scale kernel registered with kjit.ops.custom_op and kjit.ops.rms_norm(out=), against torch's
    own ops compiled the same way. Each compiles on its first call (the warm-up)."""
    x = torch.ones(256, device="cuda")
    tmpl = kjit.Template("bench_scale_op", SOURCE, params={"T": ["float"]},
                         arguments=["T*", "float"], kernel="scale")
    scale = kjit.ops.custom_op("bench_scale", tmpl, {"T": "float"}, grid=1, block=256)
    xb = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(xb)
    functions = {
        "compiled kjit custom_op scale": lambda: scale(x, 1.0),
        "compiled torch x.mul_(1.0)": lambda: x.mul_(1.0),
        "compiled kjit.ops.rms_norm(out=)": lambda: kjit.ops.rms_norm(xb, w, 1e-6, out=out),
        "compiled kjit.ops.rms_norm": lambda: kjit.ops.rms_norm(xb, w, 1e-6),
        "compiled F.rms_norm": lambda: F.rms_norm(xb, (4096,), w, 1e-6),
    }
    ways = {}
    for name, function in functions.items():
        compiled = torch.compile(function, fullgraph=True)
        try:
            compiled()
            ways[name] = compiled
        except Exception as error:  # noqa: a failure is reported, not fatal
            print(f"{name} not measured: {type(error).__name__}: {str(error)[:300]}")
    return ways


def cpp_launches(bench):
    """kjit_gpu_bench's BM_LaunchCost (raw cuLaunchKernel, a held kjit::Kernel), run now."""
    if not bench or not os.path.exists(bench):
        print(f"C++ launches not measured: no kjit_gpu_bench at {bench}")
        return {}
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        result = subprocess.run([bench, "--benchmark_filter=^BM_LaunchCost/",
                                 f"--benchmark_out={report.name}",
                                 "--benchmark_out_format=json"], capture_output=True, text=True)
        try:
            counters = json.load(open(report.name))["benchmarks"][0]
            return {"C++ raw cuLaunchKernel": counters["raw_us"],
                    "C++ held kjit::Kernel": counters["held_us"]}
        except (ValueError, KeyError, IndexError) as error:
            print(f"C++ launches not measured ({error}): exit {result.returncode}\n"
                  f"{result.stdout[-800:]}\n{result.stderr[-800:]}")
            return {}


def first_call():
    program = ("import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter();"
               "import kjit; t2 = time.perf_counter();"
               f"tmpl = kjit.Template('bench_first', {SOURCE!r}, params={{'T': ['float']}},"
               "arguments=['T*', 'float'], kernel='scale');"
               "x = torch.ones(256, device='cuda'); torch.cuda.synchronize(); t3 = time.perf_counter();"
               "k = kjit.Runtime().kernel(tmpl, {'T': 'float'}); k(x, 2.0, grid=1, block=256);"
               "torch.cuda.synchronize(); t4 = time.perf_counter();"
               "print((t1-t0)*1e3, (t2-t1)*1e3, (t4-t3)*1e3)")
    env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(kjit.__file__), "..")}
    runs = []
    for _ in range(2):  # the first compiles, the second finds the entry on disk
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                             env=env)
        runs.append(out.stdout.split() or [out.stderr[-300:]])
    return runs


if __name__ == "__main__":
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"Python {sys.version.split()[0]}")
    results = interleaved(ways_for_scale())
    results.update(cpp_launches(sys.argv[1] if len(sys.argv) > 1 else None))
    held = results.get("C++ held kjit::Kernel")
    print(f"\n{'one-block scale kernel':36s} {'us/launch':>10s} {'- C++ held':>11s}")
    for name, us in results.items():
        extra = f"{us - held:+11.2f}" if held else ""
        print(f"{name:36s} {us:10.2f} {extra}")
    print(f"\n{'rms_norm 1 x 4096 bf16':34s} {'us/call':>10s}")
    for name, us in interleaved(ways_for_rms_norm()).items():
        print(f"{name:34s} {us:10.2f}")
    print(f"\n{'through torch.compile(fullgraph=True)':34s} {'us/call':>10s}")
    for name, us in interleaved(ways_through_compile()).items():
        print(f"{name:34s} {us:10.2f}")
    runs = first_call()
    print("\nnew process: import torch ms, import kjit ms, first kernel (load + launch + sync) ms")
    print(f"  compiling: {runs[0]}\n  warm cache: {runs[1]}")
