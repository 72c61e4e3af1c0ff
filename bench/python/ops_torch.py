"""torch on the shapes and element types of kjit_ops_gpu_bench, measured the same way: bytes
moved per call (every input element read once, every output written once) over the time per
call, the best of 5 bursts of calls lasting ~25 ms each, and that as a percentage of torch's own
device-to-device copy bandwidth (y.copy_(x), 512 MiB) measured in the same run. Timed with CUDA
events around each burst. The figures are what kjit's are compared with in BENCHMARKS.md.

    python3 bench/python/ops_torch.py [--quick]

Shapes are [rows, hidden]; the gated forms read [rows, hidden] (a and b, hidden / 2 each) and
write [rows, hidden / 2], as silu(a) * b in eager torch: two kernels, whose extra traffic is
what a fused operator saves. fused_add_rms_norm is torch's eager equivalent, r = x + r followed
by F.rms_norm(r), counted with the fused operator's bytes.
"""
import sys


def seconds_per_call(torch, fn, burst_s=0.025, bursts=5, statistic=min, least_calls=3):
    """The time per call of `fn`: `statistic` over `bursts` bursts of back-to-back calls lasting
    about `burst_s` each, timed with CUDA events after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)

    def burst(calls):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3

    calls = min(max(int(burst_s / max(burst(3) / 3, 1e-7)), least_calls), 2000)
    return statistic([burst(calls) / calls for _ in range(bursts)])


def cases(torch, rows, hidden, dtype):
    import torch.nn.functional as F

    x = torch.empty(rows, hidden, device="cuda", dtype=dtype).uniform_(-2, 2)
    r = torch.empty_like(x).uniform_(-2, 2)
    w = torch.empty(hidden, device="cuda", dtype=dtype).uniform_(-2, 2)
    b = torch.empty_like(w).uniform_(-2, 2)
    n, s, d = rows * hidden, x.element_size(), hidden // 2

    def fused_add_rms_norm():
        r.add_(x)
        return F.rms_norm(r, (hidden,), w, 1e-6)

    return [
        ("rms_norm", (2 * n + hidden) * s, lambda: F.rms_norm(x, (hidden,), w, 1e-6)),
        ("fused_add_rms_norm", (4 * n + hidden) * s, fused_add_rms_norm),
        ("layer_norm", (2 * n + 2 * hidden) * s, lambda: F.layer_norm(x, (hidden,), w, b, 1e-5)),
        ("softmax", 2 * n * s, lambda: torch.softmax(x, dim=-1)),
        ("silu", 2 * n * s, lambda: F.silu(x)),
        ("gelu", 2 * n * s, lambda: F.gelu(x)),
        ("gelu_tanh", 2 * n * s, lambda: F.gelu(x, approximate="tanh")),
        ("relu", 2 * n * s, lambda: torch.relu(x)),
        ("sigmoid", 2 * n * s, lambda: torch.sigmoid(x)),
        ("silu_and_mul", 1.5 * n * s, lambda: F.silu(x[:, :d]) * x[:, d:]),
        ("gelu_and_mul", 1.5 * n * s, lambda: F.gelu(x[:, :d]) * x[:, d:]),
    ]


def main():
    try:
        import torch
    except ImportError as error:
        print(f"ops_torch: torch not available ({error})")
        return
    if not torch.cuda.is_available():
        print("ops_torch: no CUDA device")
        return
    quick = "--quick" in sys.argv
    shapes = [(8192, 8192)] if quick else [(8192, 8192), (16384, 8192)]

    copy_bytes = 512 << 20
    src = torch.empty(copy_bytes, device="cuda", dtype=torch.uint8).random_(0, 255)
    dst = torch.empty_like(src)
    copy = 2 * copy_bytes / seconds_per_call(torch, lambda: dst.copy_(src))
    del src, dst
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"copy: {copy / 1e9:.1f} GB/s (x.copy_, 512 MiB)")
    print(f"{'op':<20} {'shape':<12} {'dtype':<9} {'us/call':>10} {'GB/s':>9} {'% copy':>8}")
    for dtype, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16"),
                        (torch.float32, "float32")):
        for rows, hidden in shapes:
            for op, nbytes, fn in cases(torch, rows, hidden, dtype):
                shape = f"{rows}x{hidden}"
                try:
                    seconds = seconds_per_call(torch, fn)
                except (AttributeError, RuntimeError) as error:  # F.rms_norm needs torch 2.4
                    print(f"{op:<20} {shape:<12} {name:<9} unavailable: {error}", flush=True)
                    continue
                bandwidth = nbytes / seconds
                print(f"{op:<20} {shape:<12} {name:<9} {seconds * 1e6:>10.1f} "
                      f"{bandwidth / 1e9:>9.1f} {100 * bandwidth / copy:>7.1f}%", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
