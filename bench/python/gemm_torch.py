"""torch on the shapes and dtypes kjit_gemm_gpu_bench measures: torch.matmul's TFLOP/s, and the
GB/s of the eager torch equivalents of the rotary embedding (vLLM's forward_native, NeoX) and of
per-token int8 / fp8 quantisation, counting the bytes the same way (each tensor read or written
once). Times with CUDA events: the median of 5 batches per operation. Prints one table.

    python3 bench/python/gemm_torch.py
    python3 bench/python/gemm_torch.py --linear [M,M,...] [KxN,KxN,...]

--linear: `kjit.ops.linear` against `torch.nn.functional.linear` in the same process instead, at
weights (K x N) 4096 x 4096, 8192 x 8192 and 14336 x 4096 (or the weights listed, "4096x4096"),
bfloat16 and float16, m = 1, 2, 4, 8, 16, 32, 64 and 128 rows (or the rows listed), each as a
user calls it (the output allocated).
Each way is timed two ways, in turns (torch, kjit, torch, ...: a drift of the card's speed
touches both): 100 calls captured in one CUDA graph and replayed (the device's time per call,
as a decode step under CUDA graphs sees it), and 100 calls eagerly (the host's time per call
counts where it is longer than the device's). The calls go round copies of the weight over 256
MiB or more, so that L2 serves none of it. Needs the kjit package (PYTHONPATH, KJIT_C_LIBRARY).
Before timing, kjit's result (output poisoned with NaN) is checked against float32 torch within
one unit in the last place of the output's largest value; a miss is printed and exits 1.
"""
import statistics
import sys


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


LINEAR_WEIGHTS = ((4096, 4096), (8192, 8192), (14336, 4096))  # K x N
LINEAR_ROWS = (1, 2, 4, 8, 16, 32, 64, 128)


def graph_of(torch, call, launches):
    """`launches` calls of call(i) captured in one CUDA graph, after one eager call (which
    compiles kjit's variant for the shape: a capture may compile nothing)."""
    call(0)
    torch.cuda.synchronize()
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            for i in range(launches):
                call(i)
    torch.cuda.synchronize()
    return graph


def recorded(torch, run):
    """run() between two timing events recorded on the current stream: (start, end)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    return start, end


def ms_in_turns(torch, runs, launches, rounds=5):
    """The median over `rounds` of each run's time per call (run() makes `launches` calls), the
    runs timed in turns within each round."""
    samples = [[] for _ in runs]
    for run in runs:  # warm
        run()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for index, run in enumerate(runs):
            start, end = recorded(torch, run)
            end.synchronize()
            samples[index].append(start.elapsed_time(end) / launches)
    return [statistics.median(s) for s in samples]


def ms_queued_in_turns(torch, runs, cycles):
    """Each run's median time over `cycles` cycles of every run in turn. All runs are queued back
    to back, each between two events, and waited for once at the end: a run timed from an idle
    device would hold the host's work before its first launch (which fused_moe has more of than
    a bare GEMM: its checks and its plan's lookup) and the clock's ramp from idle."""
    events = [[] for _ in runs]
    for _ in range(cycles):
        for index, run in enumerate(runs):
            events[index].append(recorded(torch, run))
    torch.cuda.synchronize()
    return [statistics.median(start.elapsed_time(end) for start, end in pairs)
            for pairs in events]


def linear_agrees(torch, kjit_ops, x, weight):
    """kjit.ops.linear into a NaN-poisoned output, within one unit in the last place of the
    output's largest value of float32 torch (a rounding of each output and float sums)."""
    out = torch.full((x.shape[0], weight.shape[0]), float("nan"), device="cuda", dtype=x.dtype)
    kjit_ops.linear(x, weight, out=out)
    exact = x.float() @ weight.float().t()
    ulp = exact.abs().max().item() * (2.0**-7 if x.dtype == torch.bfloat16 else 2.0**-10)
    error = (out.float() - exact).abs().max().item()  # NaN (an unwritten output) fails too
    return error <= ulp, error, ulp


def linear_compare_rows(torch, rows, weights_kn):
    import torch.nn.functional as F

    import kjit.ops as kjit_ops

    launches = 100
    print("| K x N | m | dtype | torch graph us | kjit graph us | torch / kjit (graph) "
          "| torch eager us | kjit eager us | torch / kjit (eager) |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    agree = True
    for k, n in weights_kn:
        for dtype in (torch.bfloat16, torch.float16):
            weight_bytes = n * k * 2
            copies = max(1, (256 << 20) // weight_bytes + 1)
            weights = [torch.rand(n, k, device="cuda", dtype=dtype) * 2 - 1 for _ in range(copies)]
            for m in rows:
                x = torch.rand(m, k, device="cuda", dtype=dtype) * 2 - 1
                ok, error, ulp = linear_agrees(torch, kjit_ops, x, weights[0])
                if not ok:
                    print(f"kjit.ops.linear {k} x {n}, m {m}, {dtype}: error {error} over "
                          f"the bound {ulp}")
                    agree = False
                ways = (lambda i: F.linear(x, weights[i % copies]),
                        lambda i: kjit_ops.linear(x, weights[i % copies]))
                try:
                    graphs = [graph_of(torch, way, launches) for way in ways]
                except Exception as error:  # a refused capture: say so, time the rest
                    print(f"| {k} x {n} | {m} | {dtype} | capture failed: {error} |")
                    agree = False
                    continue
                turn = [0]

                def eager(way):
                    def run():
                        for _ in range(launches):
                            turn[0] += 1
                            way(turn[0])
                    return run

                graph_ms = ms_in_turns(torch, [g.replay for g in graphs], launches)
                eager_ms = ms_in_turns(torch, [eager(way) for way in ways], launches)
                print(f"| {k} x {n} | {m} | {str(dtype).replace('torch.', '')} "
                      f"| {graph_ms[0] * 1e3:.2f} | {graph_ms[1] * 1e3:.2f} "
                      f"| {graph_ms[0] / graph_ms[1]:.2f} | {eager_ms[0] * 1e3:.2f} "
                      f"| {eager_ms[1] * 1e3:.2f} | {eager_ms[0] / eager_ms[1]:.2f} |")
                del graphs
            del weights
    if not agree:
        raise SystemExit(1)


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
    if len(sys.argv) > 1 and sys.argv[1] == "--linear":
        listed = sys.argv[2] if len(sys.argv) > 2 else ""
        weights = sys.argv[3] if len(sys.argv) > 3 else ""
        linear_compare_rows(torch, [int(m) for m in listed.split(",")] if listed else LINEAR_ROWS,
                            [tuple(int(x) for x in kn.split("x")) for kn in weights.split(",")]
                            if weights else LINEAR_WEIGHTS)
        raise SystemExit(0)
    print("| op | shape | dtype | ms | GB/s or rate |\n| --- | --- | --- | --- | --- |")
    rotary_rows(torch)
    quant_rows(torch)
    matmul_rows(torch)
