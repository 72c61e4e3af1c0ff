"""torch on the shapes and dtypes kjit_gemm_gpu_bench measures: torch.matmul's TFLOP/s, and the
GB/s of the eager torch equivalents of the rotary embedding (vLLM's forward_native, NeoX) and of
per-token int8 / fp8 quantisation, counting the bytes the same way (each tensor read or written
once). Times with CUDA events: the median of 5 batches per operation. Prints one table.

    python3 bench/python/gemm_torch.py
"""
import statistics


def median_ms(torch, run, launches):
    run()
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / launches)
    return statistics.median(samples)


def rotary_rows(torch):
    tokens, q_heads, kv_heads, head = 16384, 32, 8, 128
    max_position = 8192
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        q = torch.rand(tokens, q_heads * head, device="cuda", dtype=dtype) * 2 - 1
        k = torch.rand(tokens, kv_heads * head, device="cuda", dtype=dtype) * 2 - 1
        cache = torch.rand(max_position, head, device="cuda", dtype=dtype)
        positions = torch.arange(tokens, device="cuda") % max_position

        def rotate(x, cos, sin):
            x = x.view(tokens, -1, head)
            x1, x2 = x[..., : head // 2], x[..., head // 2 :]
            x.copy_(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1))

        def run():
            cos, sin = cache[positions].chunk(2, dim=-1)
            cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
            rotate(q, cos, sin)
            rotate(k, cos, sin)

        ms = median_ms(torch, run, 20)
        size = q.element_size()
        bytes_moved = 2 * (q.numel() + k.numel()) * size + tokens * (head * size + 8)
        print(f"| torch rotary (NeoX, eager) | {tokens} tokens, {q_heads}/{kv_heads} heads "
              f"of {head} | {dtype} | {ms:.3f} | {bytes_moved / ms * 1e-6:.0f} |")


def quant_rows(torch):
    rows, hidden = 8192, 8192
    kinds = [("int8", 127.0, torch.int8)]
    if hasattr(torch, "float8_e4m3fn") and torch.cuda.get_device_capability() >= (8, 9):
        kinds.append(("fp8 e4m3", 448.0, torch.float8_e4m3fn))
    for name, qmax, out_type in kinds:
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            x = torch.rand(rows, hidden, device="cuda", dtype=dtype) * 2 - 1

            def run():
                scale = x.abs().amax(dim=-1, keepdim=True).float() / qmax
                q = (x.float() / scale).clamp(-qmax, qmax)
                return (q.round() if out_type == torch.int8 else q).to(out_type), scale

            ms = median_ms(torch, run, 20)
            bytes_moved = x.numel() * (x.element_size() + 1) + rows * 4
            print(f"| torch quant {name} (eager) | {rows} x {hidden} | {dtype} | {ms:.3f} "
                  f"| {bytes_moved / ms * 1e-6:.0f} |")


def matmul_rows(torch):
    for size in (4096, 8192):
        for dtype in (torch.float16, torch.bfloat16):
            a = torch.rand(size, size, device="cuda", dtype=dtype) * 2 - 1
            b = torch.rand(size, size, device="cuda", dtype=dtype) * 2 - 1
            ms = median_ms(torch, lambda: torch.matmul(a, b), 10 if size == 4096 else 3)
            print(f"| torch.matmul | {size} x {size} x {size} | {dtype} | {ms:.3f} "
                  f"| {2 * size**3 / ms * 1e-9:.1f} TFLOP/s |")


def cuda_torch():
    """torch with a CUDA device, after printing which; else prints why not and exits 0 (nothing
    to compare against)."""
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
    except Exception as error:  # no torch, or no GPU
        print(f"no result: {error}")
        raise SystemExit(0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    return torch


if __name__ == "__main__":
    torch = cuda_torch()
    print("| op | shape | dtype | ms | GB/s or rate |\n| --- | --- | --- | --- | --- |")
    rotary_rows(torch)
    quant_rows(torch)
    matmul_rows(torch)
