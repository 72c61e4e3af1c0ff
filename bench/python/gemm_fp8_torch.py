"""torch._scaled_mm on DeepGEMM's shapes: the baseline kjit's gemm_fp8 is read against, in the same
call. Where the kjit package imports (the bundle's python/ on PYTHONPATH and KJIT_C_LIBRARY set,
as tools/gpu-check --run-python sets them), kjit.ops.gemm_fp8 is timed in the same process, each
form next to torch's: per tensor and row-wise against `torch._scaled_mm` (use_fast_accum off,
torch's default), block scales (1 x 128 of A, 128 x 128 of B) beside torch's per-tensor figure,
as sm_90's torch has no block-scaled form. Without kjit: skinny_fp8_torch.py's FP8 rows alone.
Times with CUDA events: the median of 5 batches.

    [PYTHONPATH=build/gpu-bundle/python KJIT_C_LIBRARY=build/gpu-bundle/lib/libkjit_c.so] \\
        python3 bench/python/gemm_fp8_torch.py
"""
from gemm_torch import cuda_torch, median_ms
from skinny_fp8_torch import scaled_mm_rows


def kjit_rows(torch, ops):
    print("| M x N x K | form | kjit ms | kjit TFLOP/s | torch ms | torch TFLOP/s | kjit / torch |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")
    e4m3 = torch.float8_e4m3fn
    for n, k in ((7168, 16384), (4096, 7168), (2112, 7168)):
        for m in (4096, 128, 64):
            a = (torch.rand(m, k, device="cuda") * 2 - 1).to(e4m3)
            w = (torch.rand(n, k, device="cuda") * 2 - 1).to(e4m3)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            flop = 2 * m * n * k
            launches = max(2, min(200, int(2e12 / flop / 20) + 1))
            one = torch.ones((), device="cuda")
            forms = (  # name, kjit's scales, torch's scales (None: torch has no such form)
                ("per tensor", (one, one), (one, one)),
                ("row-wise", (torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda")),
                 (torch.ones(m, 1, device="cuda"), torch.ones(1, n, device="cuda"))),
                ("block scales", (torch.ones(m, k // 128, device="cuda"),
                                  torch.ones((n + 127) // 128, k // 128, device="cuda")), None),
            )
            torch_ms = {}
            for name, (kjit_a, kjit_b), torch_scales in forms:
                kjit_ms = median_ms(torch, lambda: ops.gemm_fp8(a, w.t(), kjit_a, kjit_b, out=out),
                                    launches)
                # Block scales are read against torch's per-tensor figure of this shape.
                if torch_scales is not None:
                    torch_ms[name] = median_ms(
                        torch, lambda: torch._scaled_mm(a, w.t(), scale_a=torch_scales[0],
                                                        scale_b=torch_scales[1],
                                                        out_dtype=torch.bfloat16), launches)
                baseline = torch_ms[name if torch_scales is not None else "per tensor"]
                label = name if torch_scales is not None else name + " (torch: per tensor)"
                print(f"| {m} x {n} x {k} | {label} | {kjit_ms:.4f} | {flop / kjit_ms * 1e-9:.1f} "
                      f"| {baseline:.4f} | {flop / baseline * 1e-9:.1f} | {baseline / kjit_ms:.3f} |")


if __name__ == "__main__":
    torch = cuda_torch()
    if torch.cuda.get_device_capability() >= (9, 0):
        try:
            from kjit import ops
        except Exception as error:  # no kjit package here: torch's rows alone
            print(f"kjit not imported ({error}); torch._scaled_mm alone\n")
            scaled_mm_rows(torch)
        else:
            kjit_rows(torch, ops)
