"""torch beside `kjit tune` (bench/tune/run.sh): rms_norm, softmax and silu_and_mul in bf16 at the
shapes of bench/tune/shapes.json, timed as kjit's tuner times (CUDA events around bursts of
about 200 us of calls, median of 15 bursts, no L2 flush). silu_and_mul is eager torch's
F.silu(x[:, :d]) * x[:, d:] over x of [rows, 2d]. One JSON line per shape.

    python3 bench/python/tune_torch.py [SHAPES.json]
"""
import json
import sys

import ops_torch  # beside this file


def median_us(torch, fn):
    median = lambda times: sorted(times)[len(times) // 2]
    return 1e6 * ops_torch.seconds_per_call(torch, fn, burst_s=200e-6, bursts=15,
                                            statistic=median, least_calls=1)


def main():
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as error:
        print(f"tune_torch: torch not available ({error})")
        return
    if not torch.cuda.is_available():
        print("tune_torch: no CUDA device")
        return
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/tune/shapes.json"
    shapes = json.load(open(path))
    for dtype_name in shapes["types"]:
        dtype = getattr(torch, dtype_name)
        for length in shapes["lengths"]:
            for rows in shapes["rows"]:
                x = torch.empty(rows, length, device="cuda", dtype=dtype).uniform_(-2, 2)
                w = torch.empty(length, device="cuda", dtype=dtype).uniform_(-2, 2)
                g = torch.empty(rows, 2 * length, device="cuda", dtype=dtype).uniform_(-2, 2)
                cases = {
                    "rms_norm": lambda: F.rms_norm(x, (length,), w, 1e-6),
                    "softmax": lambda: torch.softmax(x, dim=-1),
                    "silu_and_mul": lambda: F.silu(g[:, :length]) * g[:, length:],
                }
                for op, fn in cases.items():
                    print(json.dumps({"op": op, "type": dtype_name, "rows": rows,
                                      "length": length, "torch_us": median_us(torch, fn)}),
                          flush=True)
                del x, w, g
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
