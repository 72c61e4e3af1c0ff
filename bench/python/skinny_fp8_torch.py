"""torch on the shapes `kjit_gemm_gpu_bench --skinny-fp8` measures, in the same call:
torch.nn.functional.linear at m = 1..128 tokens (weights rotated over 256 MiB or more so that L2
serves none, as kjit's rows do), and torch._scaled_mm e4m3 -> bfloat16 on DeepGEMM's shapes,
per tensor and row-wise (use_fast_accum off, torch's default, and on), plus the 1 x 128 / 128 x
128 block-scaled form where this torch has it. Times with CUDA events: the median of 5 batches.

    python3 bench/python/skinny_fp8_torch.py [--linear]

--linear: the copy and the F.linear rows alone.
"""
import sys

from gemm_torch import cuda_torch, median_ms  # this folder's: the same timing and setup


def linear_rows(torch):
    import torch.nn.functional as F

    print("| torch F.linear | K x N | m | dtype | us | weights GB/s |\n| --- | --- | --- | --- | --- | --- |")
    for k, n in ((4096, 4096), (8192, 8192), (14336, 4096)):
        for dtype in (torch.bfloat16, torch.float16):
            weight_bytes = n * k * 2
            copies = max(1, (256 << 20) // weight_bytes + 1)
            weights = [torch.rand(n, k, device="cuda", dtype=dtype) * 2 - 1 for _ in range(copies)]
            for m in (1, 2, 4, 8, 16, 32, 64, 128):
                x = torch.rand(m, k, device="cuda", dtype=dtype) * 2 - 1
                turn = [0]

                def run():
                    turn[0] += 1
                    return F.linear(x, weights[turn[0] % copies])

                ms = median_ms(torch, run, 100)
                print(f"| torch F.linear | {k} x {n} | {m} | {dtype} | {ms * 1e3:.2f} "
                      f"| {weight_bytes / ms * 1e-6:.0f} |")
            del weights


def copy_row(torch):
    size = 256 << 20
    a = torch.empty(size, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = median_ms(torch, lambda: b.copy_(a), 20)
    print(f"\ntorch device copy: {2 * size / ms * 1e-6:.0f} GB/s (bytes read + written)\n")


def scaled_mm_rows(torch):
    print("| torch._scaled_mm | M x N x K | form | ms | TFLOP/s |\n| --- | --- | --- | --- | --- |")
    e4m3 = torch.float8_e4m3fn
    for n, k in ((7168, 16384), (4096, 7168), (2112, 7168)):
        for m in (4096, 128, 64):
            a = (torch.rand(m, k, device="cuda") * 2 - 1).to(e4m3)
            b = (torch.rand(n, k, device="cuda") * 2 - 1).to(e4m3)
            flop = 2 * m * n * k
            launches = max(2, min(200, int(2e12 / flop / 20) + 1))
            forms = [
                ("per tensor", torch.ones((), device="cuda"), torch.ones((), device="cuda"), False),
                ("per tensor, fast accum", torch.ones((), device="cuda"), torch.ones((), device="cuda"), True),
                ("row-wise", torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda"), False),
                ("row-wise, fast accum", torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda"), True),
                ("block 1x128 / 128x128", torch.ones(m, k // 128, device="cuda"),
                 torch.ones((n + 127) // 128, k // 128, device="cuda"), False),
            ]
            for name, scale_a, scale_b, fast in forms:
                def run():
                    return torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=scale_b.t()
                                            if scale_b.dim() == 2 and name.startswith("block") else scale_b,
                                            out_dtype=torch.bfloat16, use_fast_accum=fast)
                try:
                    ms = median_ms(torch, run, launches)
                except Exception as error:  # a form this torch or cuBLAS lacks
                    print(f"| torch._scaled_mm | {m} x {n} x {k} | {name} | no result: "
                          f"{str(error).splitlines()[0][:100]} | |")
                    continue
                print(f"| torch._scaled_mm | {m} x {n} x {k} | {name} | {ms:.4f} "
                      f"| {flop / ms * 1e-9:.1f} |")


if __name__ == "__main__":
    torch = cuda_torch()
    copy_row(torch)
    linear_rows(torch)
    print()
    if torch.cuda.get_device_capability() >= (9, 0) and "--linear" not in sys.argv[1:]:
        scaled_mm_rows(torch)
