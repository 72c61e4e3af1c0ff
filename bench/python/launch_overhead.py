"""Per-launch host cost of CuPy's RawKernel and of a Triton kernel, measured as kjit_gpu_bench
measures its own: the same tiny kernel (scale 256 floats) launched in bursts of 128 onto an idle
device, timing the burst alone. Prints one line per library: the median over 2000 bursts.

    python3 bench/python/launch_overhead.py
"""
import statistics
import time

BURST = 128
BURSTS = 2000


def per_launch_us(launch, synchronize):
    launch()
    synchronize()
    samples = []
    for _ in range(BURSTS):
        synchronize()
        start = time.perf_counter()
        for _ in range(BURST):
            launch()
        samples.append((time.perf_counter() - start) / BURST * 1e6)
    synchronize()
    return statistics.median(samples)


def cupy_raw_kernel():
    import cupy

    kernel = cupy.RawKernel(
        r"""extern "C" __global__ void scale(float *x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 256) x[i] = x[i] * a;
}""",
        "scale",
    )
    x = cupy.ones(256, dtype=cupy.float32)
    a = cupy.float32(1.0)
    return per_launch_us(lambda: kernel((1,), (256,), (x, a)), cupy.cuda.Device().synchronize)


def triton_kernel():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, a, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * a, mask=mask)

    x = torch.ones(256, device="cuda", dtype=torch.float32)
    return per_launch_us(lambda: scale[(1,)](x, 1.0, 256, BLOCK=256), torch.cuda.synchronize)


if __name__ == "__main__":
    for name, measure in (("cupy RawKernel", cupy_raw_kernel), ("triton", triton_kernel)):
        try:
            print(f"{name:16s} {measure():7.3f} us per launch")
        except Exception as error:  # a missing package is reported, not fatal
            print(f"{name:16s} not measured: {error}")
