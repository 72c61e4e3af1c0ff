"""torch._scaled_mm alone on DeepGEMM's shapes: the baseline `kjit_gemm_gpu_bench --fp8` is read
against, in the same call (skinny_fp8_torch.py's FP8 rows without its F.linear rows).

    python3 bench/python/gemm_fp8_torch.py
"""
from gemm_torch import cuda_torch
from skinny_fp8_torch import scaled_mm_rows

if __name__ == "__main__":
    torch = cuda_torch()
    if torch.cuda.get_device_capability() >= (9, 0):
        scaled_mm_rows(torch)
