"""dec5's exploration of paged decode at batch 1 x 32k (bf16, GQA 32/8, head dim 128, page 16),
every figure from this one process, each variant checked against the fp32 torch reference first
(paged_attention_torch's protocol: best of 5 bursts of ~25 ms, CUDA events):

- the copy rate and every SDPA backend on the same K/V;
- the decode kernel launched directly at split counts whose partitions are not rounded to 64
  tokens (33 splits: 264 blocks, two on each of 132 multiprocessors), and with WARPS 2;
- sources of the kernel given as label=path in KJIT_DECODE_SOURCES at 32 and 33 splits;
- the whole call through kjit.ops (the C++ wrapper: the merge as a programmatic dependent launch
  on sm_90) against the same kernels launched directly (an ordinary merge launch), at the three
  goal shapes;
- deeper rings than the built-in template declares (STAGES up to 6 within the 48 KiB a launch
  takes without opting in) at batch 1 x 32k, from this attention_decode.hip as a template of its
  own.

    python3 explore_dec5.py [goals] [splits] [sources] [rings]   (default: the first three)
"""
import os
import sys

import torch

import kjit
import paged_attention_torch as bench
from ops_torch import seconds_per_call


def with_geometry(case, splits, partition):
    case.splits, case.partition = splits, partition
    case.grid = (case.grid[0], case.batch, splits)
    case.args = case.args[:-2] + (partition, case.ctx)
    case.workspace()
    return case


def timed(label, case, copy, call=None):
    err, ok = bench.reference_error(case, call)
    t = seconds_per_call(torch, call or case)
    t_decode = seconds_per_call(torch, case.decode) if case.splits > 1 and call is None else None
    line = (f"{label}: splits {case.splits} partition {case.partition}: fp32 check "
            f"{'ok' if ok else 'FAILED'} ({err:.1e}); {t * 1e6:.1f} us, "
            f"{100 * case.kv_bytes() / t / copy:.1f}% of copy")
    if t_decode:
        line += (f" (decode kernel alone {t_decode * 1e6:.1f} us, "
                 f"{100 * case.kv_bytes() / t_decode / copy:.1f}%)")
    print(line, flush=True)
    return ok


def main():
    torch.manual_seed(0)
    rt = kjit.default_runtime()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    copy = bench.copy_rate(torch)
    print(f"copy: {copy / 1e9:.0f} GB/s (read + write)", flush=True)
    failed = False
    parts = sys.argv[1:] or ["goals", "splits", "sources"]
    # The goal shapes: the whole call through kjit.ops (merge with PDL) and the same kernels
    # launched directly (ordinary merge launch), then SDPA.
    for batch, ctx in ((1, 32768), (64, 4096), (256, 1024)) if "goals" in parts else ():
        case = bench.Decode(rt, batch, ctx)
        failed |= not timed(f"b{batch}x{ctx} kjit.ops (PDL merge)", case, copy, case.op)
        failed |= not timed(f"b{batch}x{ctx} direct (plain merge)", case, copy)
        failed |= not timed(f"b{batch}x{ctx} kjit.ops again", case, copy, case.op)
        for name, s in bench.sdpa_times(torch, case).items():
            print(f"    sdpa {name}: " + (s if isinstance(s, str) else
                                          f"{s * 1e6:.1f} us "
                                          f"({100 * case.kv_bytes() / s / copy:.1f}% of copy)"),
                  flush=True)
        del case
        torch.cuda.empty_cache()
    # Split counts at batch 1 x 32k with exact partitions.
    for splits in (32, 33, 34, 44, 48, 49, 50, 66) if "splits" in parts else ():
        partition = -(-32768 // splits)
        for warps in ((4, 2) if splits in (33, 66) else (4,)):
            case = with_geometry(bench.Decode(rt, 1, 32768, warps=warps),
                                 -(-32768 // partition), partition)
            failed |= not timed(f"b1x32768 WARPS {warps}", case, copy)
            del case
    # Other sources of the kernel, at 32 and 33 splits.
    sources = os.environ.get("KJIT_DECODE_SOURCES", "") if "sources" in parts else ""
    for item in filter(None, sources.split(",")):
        label, path = item.split("=", 1)
        decode, merge = bench.source_templates(label, open(path).read())
        for splits in (32, 33):
            case = bench.Decode(rt, 1, 32768)
            case.kernel = rt.kernel(decode, {"T": "bfloat16", "KV_FP8": 0, "HEAD_DIM": 128,
                                             "PAGE": 16, "GROUP": 4, "WARPS": 4, "UNROLL": 2,
                                             "LOADS": 2, "STAGES": 3})
            case.merge = rt.kernel(merge, {"T": "bfloat16", "HEAD_DIM": 128})
            case = with_geometry(case, splits, -(-32768 // splits))
            failed |= not timed(f"b1x32768 source {label}", case, copy)
            del case
    if "rings" in parts:
        failed |= not deep_rings(rt, copy)
    return 1 if failed else 0


def deep_rings(rt, copy):
    """(WARPS, UNROLL, STAGES, splits) at batch 1 x 32k, LOADS 2, each ring at most 48 KiB: more
    steps in flight per block than the plan's 2 of 3."""
    path = os.path.join(os.path.dirname(os.path.abspath(bench.__file__)), "..", "..",
                        "templates", "kernels", "attention_decode.hip")
    params = dict(bench.DECODE_PARAMS, STAGES=range(2, 9))
    decode = kjit.Template("paged_attention_decode_rings", open(os.environ.get(
        "KJIT_DECODE_RING_SOURCE", path)).read(), params=params, kernel="paged_attention_decode",
        arguments=bench.DECODE_ARGUMENTS)
    ok = True
    for warps, unroll, stages, splits in ((4, 2, 3, 32), (4, 1, 6, 32), (2, 2, 6, 32),
                                          (2, 2, 6, 49), (2, 2, 6, 66), (2, 1, 8, 66),
                                          (2, 2, 3, 66)):
        label = f"b1x32768 WARPS {warps} UNROLL {unroll} STAGES {stages}"
        try:
            case = bench.Decode(rt, 1, 32768)  # the plan's kernel, replaced below
            case.block = warps * 32
            case.shared_bytes = bench.shared_bytes(
                dict(group=4, warps=warps, unroll=unroll, loads=2, stages=stages), 128, False)
            case.kernel = rt.kernel(decode, {"T": "bfloat16", "KV_FP8": 0, "HEAD_DIM": 128,
                                             "PAGE": 16, "GROUP": 4, "WARPS": warps,
                                             "UNROLL": unroll, "LOADS": 2, "STAGES": stages})
            case = with_geometry(case, splits, -(-32768 // splits))
            ok &= timed(f"{label} ({case.shared_bytes} shared bytes)", case, copy)
            del case
        except Exception as error:  # a variant that does not build or launch
            print(f"{label}: failed ({str(error).splitlines()[0][:160]})", flush=True)
            ok = False
    return ok


if __name__ == "__main__":
    sys.exit(main())
