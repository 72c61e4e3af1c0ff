"""paged_attention_decode and reshape_and_cache (kjit's built-in templates, launched through the
kjit package) against torch on the same data, on one GPU, in one process:

- Decode (bf16, head dim 128, page 16, 32 q heads over 8 kv heads, every sequence at the full
  context): checked against an fp32 torch reference on the pages gathered contiguous (bound:
  2^-12 + 2^-7 |ref|: float accumulation, then one bf16 rounding), then timed. The KV bytes read
  per call over the time is given as a fraction of torch's device-to-device copy rate (y.copy_(x)
  of 512 MiB, read plus write bytes) measured in the same run, and the time against every
  scaled_dot_product_attention backend torch offers (flash, efficient, cuDNN, math) on the same
  K/V gathered contiguous ([batch, kv_heads, ctx, 128], enable_gqa), each timed alone.
- KV write: reshape_and_cache of 16k tokens (8 kv heads, head dim 128, bf16) to shuffled slots,
  bytes read plus written over the time, against the same copy rate and against the same run's
  copy of as many bytes.
- A split decode's breakdown: the decode kernel alone, the merge kernel alone, both.
- With KJIT_ATTENTION_BEFORE=<attention_decode.hip>:<kv_cache.hip> of an earlier version, those
  kernels too, compiled as templates of their own and launched as that version launched them: the
  same run's "before" figures, with the decode kernel alone beside them. KJIT_DECODE_SOURCES=
  label=path,... times other sources the same way: of main's form (a decode kernel, then
  paged_attention_merge) or of the merge-in-the-launch form (dec4's, measured and not kept:
  bench/results/h100-2026-11-26-dec4-s27/attention_decode_fused.patch on attention_decode.hip at
  169352d). KJIT_BENCH_QUICK=1 leaves out the sweeps of the tunables.

Times: the best of 5 bursts of ~25 ms (ops_torch.seconds_per_call), CUDA events.

    PYTHONPATH=python:bench/python KJIT_C_LIBRARY=... python3 bench/python/paged_attention_torch.py

The launch geometry mirrors the C++ wrapper's plan (ops/src/attention_decode.cpp, decode_variant
and split_decode, with RESIDENT for the registers the wrapper reads from the kernel): the
benchmark times the kernels the wrapper launches for these shapes.
"""
import math
import os
import sys

import torch

import kjit
from ops_torch import seconds_per_call

LOG2E = 1.4426950408889634


def cdiv(a, b):
    return -(-a // b)


RING_LIMIT = 48 * 1024  # decode_variant's; a tuned variant's ring may take 64 KiB on NVIDIA
# Blocks of the planned bf16 variant resident per multiprocessor, which the wrapper reads from
# the kernel's registers (resident_blocks); Python has no register count, so the bench takes the
# value from ptxas -v for sm_90a (KJIT_DECODE_RESIDENT overrides it).
RESIDENT = int(os.environ.get("KJIT_DECODE_RESIDENT", "3"))


def ring_bytes(v, warp, fp8):
    return v["stages"] * 2 * v["unroll"] * v["loads"] * v["warps"] * warp * (8 if fp8 else 16)


def shared_bytes(v, head_dim, fp8):
    """ops/src/attention_decode.cpp's decode_shared_bytes on NVIDIA: the ring or the warps'
    states merged after it, whichever is larger."""
    return max(ring_bytes(v, 32, fp8), 4 + v["warps"] * v["group"] * (2 + head_dim) * 4)


def decode_variant(warp, q_heads, kv_heads, fp8):
    """ops/src/attention_decode.cpp's decode_variant."""
    ratio = q_heads // kv_heads
    chunks = cdiv(ratio, 8)
    v = dict(group=cdiv(ratio, chunks), chunks=chunks, warps=4, unroll=2, stages=2)
    v["loads"] = 2 if v["group"] <= 4 else 1
    if ring_bytes(v, warp, fp8) > RING_LIMIT:
        v["unroll"] = 1
    while warp == 32 and v["stages"] < 4 and \
            ring_bytes(v, warp, fp8) // v["stages"] * (v["stages"] + 1) <= RING_LIMIT:
        v["stages"] += 1
    return v


def split_decode(sms, resident, blocks, max_len, may_split=True, split_cost=32):
    """ops/src/attention_decode.cpp's split_decode: (splits, partition)."""
    slots = sms * resident
    length = max(max_len, 1)

    def cost(partition, splits):
        waves = cdiv(blocks * splits, slots)
        if splits == 1:
            return waves * (partition + 64)
        return waves * (partition + 64) * 1.05 + splits * split_cost
    best, plan = cost(length, 1), (1, length)
    most = min(length // 256, 1024) if may_split else 1
    for wanted in range(2, most + 1):
        partition = cdiv(cdiv(length, wanted), 64) * 64
        splits = cdiv(length, partition)
        if splits > 1 and cost(partition, splits) < best:
            best, plan = cost(partition, splits), (splits, partition)
    return plan


def merge_threads(splits, head_dim, warp=32):
    """ops/src/attention_decode.cpp's merge_threads: head_dim / 4 threads per group of splits, a
    group per split up to 256 threads, in whole warps."""
    columns = head_dim // 4
    whole = max(1, warp // columns)
    return min(256 // columns, cdiv(splits, whole) * whole) * columns


# The stamp of a merge-in-the-launch source's split flags: one for every launch, as a CUDA graph
# replays a launch; each launch leaves its flags 0.
STAMP = 0x6b6a69745f646563


class Decode:
    def __init__(self, rt, batch, ctx, q_heads=32, kv_heads=8, head_dim=128, page=16, fp8=False,
                 warps=None, unroll=None, loads=None, stages=None, splits=None):
        dev = "cuda"
        self.batch, self.ctx, self.q_heads, self.kv_heads = batch, ctx, q_heads, kv_heads
        self.head_dim, self.page, self.fp8 = head_dim, page, fp8
        blocks_per_seq = cdiv(ctx, page)
        self.num_blocks = batch * blocks_per_seq + 7
        self.max_blocks = blocks_per_seq
        shape = (self.num_blocks, page, kv_heads, head_dim)
        if fp8:
            self.k_scale, self.v_scale = 0.01, 0.01
            # torch's cast to e4m3fn does not saturate: past 448 it gives NaN.
            self.k = (torch.randn(shape, device=dev) * 100).clamp(-448, 448).to(
                torch.float8_e4m3fn)
            self.v = (torch.randn(shape, device=dev) * 100).clamp(-448, 448).to(
                torch.float8_e4m3fn)
        else:
            self.k_scale = self.v_scale = 1.0
            self.k = torch.randn(shape, device=dev, dtype=torch.bfloat16)
            self.v = torch.randn(shape, device=dev, dtype=torch.bfloat16)
        perm = torch.randperm(self.num_blocks, device=dev)[: batch * blocks_per_seq]
        self.tables = perm.view(batch, blocks_per_seq).to(torch.int32).contiguous()
        self.lens = torch.full((batch,), ctx, device=dev, dtype=torch.int32)
        self.q = torch.randn(batch, q_heads, head_dim, device=dev, dtype=torch.bfloat16)
        self.out = torch.full_like(self.q, float("nan"))
        self.scale = 1.0 / math.sqrt(head_dim)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        v = decode_variant(32, q_heads, kv_heads, fp8)
        v.update({k: x for k, x in (("warps", warps), ("unroll", unroll), ("loads", loads),
                                    ("stages", stages)) if x})
        blocks = batch * kv_heads * v["chunks"]
        if splits:
            self.partition = cdiv(cdiv(ctx, splits), 64) * 64
            self.splits = cdiv(ctx, self.partition)
        else:
            self.splits, self.partition = split_decode(sms, RESIDENT, blocks, ctx)
        self.grid = (kv_heads * v["chunks"], batch, self.splits)
        self.block = v["warps"] * 32
        self.shared_bytes = shared_bytes(v, head_dim, fp8)
        self.kernel = rt.kernel(kjit.Template.builtin("paged_attention_decode"), {
            "T": "bfloat16", "KV_FP8": int(fp8), "HEAD_DIM": head_dim, "PAGE": page,
            "GROUP": v["group"], "WARPS": v["warps"], "UNROLL": v["unroll"],
            "LOADS": v["loads"], "STAGES": v["stages"]})
        self.workspace()
        self.merge = rt.kernel(kjit.Template.builtin("paged_attention_merge"),
                               {"T": "bfloat16", "HEAD_DIM": head_dim})
        self.args = (self.scale * LOG2E * self.k_scale, self.v_scale,
                     q_heads, kv_heads, self.num_blocks, self.max_blocks, self.partition, ctx)

    def workspace(self):
        """The split results, and a merge-in-the-launch source's flags (zero, as every launch
        leaves them)."""
        rows = self.batch * self.q_heads * self.splits
        self.partial_out = torch.empty(rows * self.head_dim, device="cuda", dtype=torch.float32)
        self.partial_lse = torch.empty(rows, device="cuda", dtype=torch.float32)
        self.done = torch.zeros(self.grid[0] * self.batch * self.splits, device="cuda",
                                dtype=torch.int64)

    def decode(self):
        """The decode kernel alone: with several splits, the partial results (which self.merge
        combines; a merge-in-the-launch source, self.merge None, combines them itself)."""
        split = self.splits > 1
        partials = (self.partial_out if split else 0, self.partial_lse if split else 0)
        if self.merge:
            self.kernel(self.out, *partials, self.q, self.k, self.v, self.tables, self.lens,
                        *self.args, grid=self.grid, block=self.block,
                        shared_bytes=self.shared_bytes)
        else:
            self.kernel(self.out, *partials, self.done if split else 0, self.q, self.k, self.v,
                        self.tables, self.lens, *self.args, STAMP if split else 0,
                        grid=self.grid, block=self.block, shared_bytes=self.shared_bytes)

    def merge_kernel(self):
        self.merge(self.out, self.partial_out, self.partial_lse, self.splits,
                   grid=self.batch * self.q_heads, block=merge_threads(self.splits, self.head_dim))

    def __call__(self):
        self.decode()
        if self.merge and self.splits > 1:
            self.merge_kernel()

    def op(self):
        """The whole call through kjit.ops (the C++ wrapper: its plan, its workspace from torch's
        allocator, the merge): what a user times. Its first call also lets the plan's kernel take
        a ring past 48 KiB (Kernel::allow_shared_bytes), which direct launches of it would need."""
        kjit.ops.paged_attention_decode(self.q, self.k, self.v, self.tables, self.lens,
                                        scale=self.scale,
                                        k_scale=self.k_scale, v_scale=self.v_scale, out=self.out)

    def gathered(self, dtype):
        """K and V of every sequence contiguous: [batch, kv_heads, ctx, head_dim]."""
        def gather(cache, scale):
            pages = cache[self.tables.long()].to(dtype) * scale  # [batch, blocks, page, h, d]
            flat = pages.reshape(self.batch, -1, self.kv_heads, self.head_dim)[:, : self.ctx]
            return flat.transpose(1, 2).contiguous()
        return gather(self.k, self.k_scale), gather(self.v, self.v_scale)

    def kv_bytes(self):
        return 2 * self.batch * self.ctx * self.kv_heads * self.head_dim * self.k.element_size()


def reference_error(case, call=None):
    """max |kjit - fp32 reference|, and whether every element is within the bound, of `call`
    (default: the kernels launched directly)."""
    k, v = case.gathered(torch.float32)
    g = case.q_heads // case.kv_heads
    q = case.q.float().view(case.batch, case.kv_heads, g, case.head_dim)
    scores = torch.einsum("bhgd,bhsd->bhgs", q, k) * case.scale
    ref = torch.einsum("bhgs,bhsd->bhgd", scores.softmax(-1), v).reshape_as(case.out)
    case.out.fill_(float("nan"))
    (call or case)()
    torch.cuda.synchronize()
    diff = (case.out.float() - ref).abs()
    ok = bool((diff <= 2 ** -12 + 2 ** -7 * ref.abs()).all())  # NaN fails
    return diff.max().item(), ok


def sdpa_times(torch_mod, case):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    k, v = case.gathered(torch.bfloat16)
    q = case.q.unsqueeze(2)  # [batch, q_heads, 1, d]
    times = {}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            def call():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, scale=case.scale,
                                                          enable_gqa=True)
            call()
            torch.cuda.synchronize()
            times[name] = seconds_per_call(torch_mod, call)
        except Exception as error:  # a backend that refuses this shape or machine
            times[name] = f"unsupported ({type(error).__name__}: {str(error).splitlines()[0][:80]})"
    return times


def copy_rate(torch_mod):
    x = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() / seconds_per_call(torch_mod, lambda: y.copy_(x))


def write_case(rt, tokens=16384, kv_heads=8, head_dim=128, page=16, fp8=False, rope=False,
               before=None, per_block=2):
    dev = "cuda"
    num_blocks = cdiv(tokens, page) * 2
    slots = num_blocks * page
    key = torch.randn(tokens, kv_heads, head_dim, device=dev, dtype=torch.bfloat16)
    value = torch.randn_like(key)
    cache_dtype = torch.uint8 if fp8 else torch.bfloat16
    k = torch.empty(num_blocks, page, kv_heads, head_dim, device=dev, dtype=cache_dtype)
    v = torch.empty_like(k)
    mapping = torch.randperm(slots, device=dev)[:tokens].to(torch.int64)
    positions = torch.randint(0, 4096, (tokens,), device=dev, dtype=torch.int64)
    cos_sin = torch.randn(4096, head_dim, device=dev, dtype=torch.bfloat16)
    kernel = rt.kernel(before or kjit.Template.builtin("reshape_and_cache"), {
        "T": "bfloat16", "KV_FP8": int(fp8), "HEAD_DIM": head_dim, "ROPE": int(rope),
        "ROTARY_DIM": head_dim if rope else 0, "VEC": 8, "TOKENS": per_block})
    row = kv_heads * head_dim
    # A thread per 16 elements of a token (two pieces of 8); before, per 8.
    threads = min(256, cdiv((2 if before else 1) * row // 8, 32) * 32)
    def call():
        kernel(key, value, k, v, mapping, positions, cos_sin, 4096, 1.0, 1.0, kv_heads, row, row,
               slots, tokens, grid=cdiv(tokens, per_block), block=threads)
    moved = 2 * key.numel() * 2 + 2 * key.numel() * k.element_size() + mapping.numel() * 8
    # The same run's copy of as many bytes (read plus write), the rate a write of this size can
    # reach: the launch and the first and last waves weigh more than in a copy of 512 MiB.
    x = torch.empty(moved // 2, dtype=torch.uint8, device=dev)
    y = torch.empty_like(x)
    same = moved / seconds_per_call(torch, lambda: y.copy_(x))
    return moved / seconds_per_call(torch, call), same


DECODE_PARAMS = {"T": ["half", "bfloat16"], "KV_FP8": [0, 1], "HEAD_DIM": [64, 128],
                 "PAGE": [16, 32], "GROUP": range(1, 9), "WARPS": [2, 4, 8], "UNROLL": [1, 2, 4],
                 "LOADS": [1, 2], "STAGES": [2, 3, 4]}
# The decode kernel's arguments (its splits combined by paged_attention_merge).
DECODE_ARGUMENTS = ["T*", "float*", "float*", "const T*", "const void*", "const void*",
                    "const int*", "const int*", "float", "float", "int", "int", "int", "int",
                    "int", "int"]
MERGE_ARGUMENTS = ["T*", "const float*", "const float*", "int"]


# The arguments of dec4's merge-in-the-launch form of the decode kernel (not kept).
FUSED_ARGUMENTS = DECODE_ARGUMENTS[:3] + ["unsigned long long*"] + DECODE_ARGUMENTS[3:] + [
    "unsigned long long"]


def source_templates(label, source):
    """The decode and merge kernels of an attention_decode.hip, as templates of their own; the
    merge is None for a source whose decode merges in its launch (dec4's)."""
    fused = "paged_attention_merge" not in source
    decode = kjit.Template(f"paged_attention_decode_{label}", source, params=DECODE_PARAMS,
                           kernel="paged_attention_decode",
                           arguments=FUSED_ARGUMENTS if fused else DECODE_ARGUMENTS)
    if fused:
        return decode, None
    merge = kjit.Template(f"paged_attention_merge_{label}", source,
                          params={"T": ["half", "bfloat16"], "HEAD_DIM": [64, 128]},
                          kernel="paged_attention_merge", arguments=MERGE_ARGUMENTS)
    return decode, merge


def before_kernels(path):
    """The kernels of an earlier attention_decode.hip and kv_cache.hip (their paths joined by ':',
    KJIT_ATTENTION_BEFORE), compiled as templates of their own: the same run's figures before a
    change; time_decode_source launches the decode as that version's wrapper did. Also whether its
    ring is dynamic shared memory."""
    decode_path, write_path = path.split(":")
    source = open(decode_path).read()
    decode = source_templates("before", source)
    write = kjit.Template("reshape_and_cache_before", open(write_path).read(),
                          params={"T": ["half", "bfloat16"], "KV_FP8": [0, 1],
                                  "HEAD_DIM": range(8, 1025), "ROPE": [0, 1, 2],
                                  "ROTARY_DIM": range(0, 1025), "VEC": [1, 2, 4, 8],
                                  "TOKENS": [1, 2, 4, 8]},
                          kernel="reshape_and_cache",
                          arguments=["const T*", "const T*", "void*", "void*", "const long long*",
                                     "const long long*", "const T*", "int", "float", "float",
                                     "int", "long long", "long long", "long long", "int"])
    return decode, write, "extern __shared__" in source


def time_decode_source(rt, label, templates, copy, dynamic=False):
    """The decode and merge kernels of another attention_decode.hip (`templates`, from
    source_templates) at the four shapes, launched as the wrapper launches them: decode_variant's
    ring, the split model's counts for 3 blocks a multiprocessor, then the merge kernel where the
    source has one (its decode kernel is then timed alone too). A source whose ring is dynamic
    shared memory gets it at launch."""
    decode, merge = templates
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch, ctx, fp8 in ((64, 4096, False), (1, 32768, False), (256, 1024, False),
                            (64, 4096, True)):
        case = Decode(rt, batch, ctx, fp8=fp8)
        v = decode_variant(32, case.q_heads, case.kv_heads, fp8)
        splits, partition = split_decode(sms, 3, batch * case.kv_heads, ctx)
        case.splits, case.partition = splits, partition
        case.grid = (case.kv_heads, batch, splits)
        case.kernel = rt.kernel(decode, {"T": "bfloat16", "KV_FP8": int(fp8), "HEAD_DIM": 128,
                                         "PAGE": 16, "GROUP": 4, "WARPS": 4, "UNROLL": 2,
                                         "LOADS": v["loads"], "STAGES": v["stages"]})
        # The merge-in-the-launch form keeps one more flag in its shared Merge.
        extra = 4 if merge is None else 0
        case.shared_bytes = shared_bytes(v, 128, fp8) + extra if dynamic else 0
        case.args = case.args[:-2] + (partition, ctx)
        case.merge = merge and rt.kernel(merge, {"T": "bfloat16", "HEAD_DIM": 128})
        case.workspace()
        err, ok = reference_error(case)
        t = seconds_per_call(torch, case)
        alone = ""
        if splits > 1 and case.merge:
            t_decode = seconds_per_call(torch, case.decode)
            alone = (f" (the decode kernel alone {t_decode * 1e6:.1f} us, "
                     f"{100 * case.kv_bytes() / t_decode / copy:.0f}%)")
        print(f"{label}: decode batch {batch} ctx {ctx} {'fp8' if fp8 else 'bf16'} (splits "
              f"{splits}, STAGES {v['stages']}): fp32 check {'ok' if ok else 'FAILED'}; "
              f"{t * 1e6:.1f} us, {100 * case.kv_bytes() / t / copy:.0f}% of copy{alone}",
              flush=True)
        del case
        torch.cuda.empty_cache()


def time_before(rt, path, copy):
    decode, write, dynamic = before_kernels(path)
    time_decode_source(rt, "before", decode, copy, dynamic)
    for fp8, rope in ((False, False), (False, True), (True, False)):
        rate, same = write_case(rt, fp8=fp8, rope=rope, before=write)
        print(f"before: reshape_and_cache 16384 tokens {'fp8' if fp8 else 'bf16'}"
              f"{' +rope' if rope else ''}: {rate / 1e9:.0f} GB/s = {100 * rate / copy:.0f}% of "
              f"copy, {100 * rate / same:.0f}% of a copy of the same bytes", flush=True)


def main():
    torch.manual_seed(0)
    # The runtime kjit.ops uses: the op's first call of a shape lets the plan's kernel take its
    # dynamic shared memory, and the direct launches below get the same kernel.
    rt = kjit.default_runtime()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    copy = copy_rate(torch)
    print(f"copy: {copy / 1e9:.0f} GB/s (read + write)")
    failed = False
    for batch, ctx, fp8 in ((64, 4096, False), (1, 32768, False), (256, 1024, False),
                            (64, 4096, True)):
        case = Decode(rt, batch, ctx, fp8=fp8)
        op_err, op_ok = reference_error(case, case.op)
        t_op = seconds_per_call(torch, case.op)
        try:
            err, ok = reference_error(case)
            t = seconds_per_call(torch, case)
        except Exception as error:  # the direct launch refused (its shared memory): the op's
            print(f"direct launch failed: {str(error).splitlines()[0][:200]}", flush=True)
            err, ok, t = op_err, op_ok, t_op
        failed |= not ok or not op_ok
        rate = case.kv_bytes() / t
        line = (f"decode batch {batch} ctx {ctx} {'fp8' if fp8 else 'bf16'} (splits "
                f"{case.splits}, {case.shared_bytes} shared bytes): fp32 check "
                f"{'ok' if ok else 'FAILED'} (max err {err:.2e}), through kjit.ops "
                f"{'ok' if op_ok else 'FAILED'} ({op_err:.2e}); "
                f"{t * 1e6:.1f} us, KV {rate / 1e9:.0f} GB/s = {100 * rate / copy:.0f}% of copy"
                f"\n    kjit.ops.paged_attention_decode (the whole call from Python): "
                f"{t_op * 1e6:.1f} us ({100 * case.kv_bytes() / t_op / copy:.0f}% of copy)")
        if not fp8:
            sdpa = sdpa_times(torch, case)
            timed = {n: s for n, s in sdpa.items() if not isinstance(s, str)}
            for name, s in sdpa.items():
                line += f"\n    sdpa {name}: " + (s if isinstance(s, str) else
                                                  f"{s * 1e6:.1f} us "
                                                  f"({100 * case.kv_bytes() / s / copy:.0f}% of copy)")
            if timed:
                best = min(timed, key=timed.get)
                line += f"\n    kjit / best sdpa ({best}): {timed[best] / t:.2f}x"
        print(line, flush=True)
        del case
        torch.cuda.empty_cache()
    # The tunables around the plan's choice (WARPS 4, UNROLL 2, LOADS 2, STAGES 3), then the
    # split count, on the same shapes (KJIT_BENCH_QUICK=1: none of the sweeps).
    quick = os.environ.get("KJIT_BENCH_QUICK") == "1"
    for batch, ctx in () if quick else ((64, 4096), (1, 32768), (256, 1024)):
        row = f"sweep batch {batch} ctx {ctx}:"
        for unroll, loads, stages in ((2, 2, 3), (2, 2, 4), (1, 2, 4), (4, 1, 3)):
            try:
                case = Decode(rt, batch, ctx, unroll=unroll, loads=loads, stages=stages)
                rate = case.kv_bytes() / seconds_per_call(torch, case)
                row += f" U{unroll}L{loads}S{stages} {100 * rate / copy:.0f}%"
                del case
            except Exception as error:
                row += f" U{unroll}L{loads}S{stages} failed ({str(error).splitlines()[0][:60]})"
        for splits in (1, 2, 3, 4, 24, 32, 40, 48, 64):
            if ctx // splits < 64:
                continue
            try:
                case = Decode(rt, batch, ctx, splits=splits)
                rate = case.kv_bytes() / seconds_per_call(torch, case)
                row += f" splits{case.splits} {100 * rate / copy:.0f}%"
                del case
            except Exception as error:
                row += f" splits{splits} failed ({str(error).splitlines()[0][:60]})"
        print(row, flush=True)
        torch.cuda.empty_cache()
    # Where a split decode's time goes: the decode kernel alone, the merge kernel alone, then both,
    # over split counts.
    for batch, ctx, counts in ((1, 32768, (32, 47) if quick else (24, 32, 40, 48)),
                               (64, 4096, (3,) if quick else (2, 3, 4))):
        for splits in counts:
            case = Decode(rt, batch, ctx, splits=splits)
            if splits in (3, 32):
                err, ok = reference_error(case)
                failed |= not ok
                print(f"check batch {batch} ctx {ctx} splits {case.splits}: "
                      f"{'ok' if ok else 'FAILED'} ({err:.2e})", flush=True)
            us = {"decode": seconds_per_call(torch, case.decode),
                  "merge": seconds_per_call(torch, case.merge_kernel)}
            us["both"] = seconds_per_call(torch, case)
            print(f"breakdown batch {batch} ctx {ctx} splits {case.splits}: " + ", ".join(
                f"{k} {t * 1e6:.1f} us" + (f" ({100 * case.kv_bytes() / t / copy:.0f}%)"
                                           if k in ("decode", "both") else "")
                for k, t in us.items()), flush=True)
            del case
        torch.cuda.empty_cache()
    row = "sweep fp8 batch 64 ctx 4096:"
    for unroll, loads, stages in () if quick else ((2, 2, 4), (2, 1, 4), (4, 1, 4), (4, 2, 2),
                                                   (4, 2, 3), (1, 2, 4)):
        try:
            case = Decode(rt, 64, 4096, fp8=True, unroll=unroll, loads=loads, stages=stages)
            rate = case.kv_bytes() / seconds_per_call(torch, case)
            row += f" U{unroll}L{loads}S{stages} {100 * rate / copy:.0f}%"
            del case
        except Exception as error:  # a variant past the ring's 48 KiB
            row += f" U{unroll}L{loads}S{stages} refused ({str(error).splitlines()[0][:60]})"
    print(row, flush=True)
    for fp8, rope in ((False, False), (False, True), (True, False)):
        rate, same = write_case(rt, fp8=fp8, rope=rope)
        print(f"reshape_and_cache 16384 tokens {'fp8' if fp8 else 'bf16'}"
              f"{' +rope' if rope else ''}: {rate / 1e9:.0f} GB/s = {100 * rate / copy:.0f}% of "
              f"copy, {100 * rate / same:.0f}% of a copy of the same bytes ({same / 1e9:.0f} GB/s)")
    for fp8, rope in () if quick else ((False, False), (False, True), (True, False)):
        row = f"sweep reshape_and_cache {'fp8' if fp8 else 'bf16'}{' +rope' if rope else ''}:"
        for per_block in (1, 2, 4, 8):
            rate, same = write_case(rt, fp8=fp8, rope=rope, per_block=per_block)
            row += f" TOKENS {per_block} {100 * rate / same:.0f}%"
        print(row + " of a copy of the same bytes", flush=True)
    if os.environ.get("KJIT_ATTENTION_BEFORE"):
        time_before(rt, os.environ["KJIT_ATTENTION_BEFORE"], copy)
    # Other sources of the decode kernel at main's launch (KJIT_DECODE_SOURCES=label=path,...).
    for item in filter(None, os.environ.get("KJIT_DECODE_SOURCES", "").split(",")):
        label, path = item.split("=", 1)
        source = open(path).read()
        time_decode_source(rt, label, source_templates(label, source), copy,
                           dynamic="extern __shared__" in source)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
