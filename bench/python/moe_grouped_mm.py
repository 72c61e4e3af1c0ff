"""fused_moe at prefill against torch's own grouped GEMM (`torch._grouped_mm`: CUTLASS on sm_90,
each expert's rows a group, no padding asked of the caller), on the layers of
kjit_moe_gpu_bench at 4096 tokens, with the dense GEMMs of the same FLOPs (torch's and kjit's
`linear`) timed in the same rounds. It asks what a grouped GEMM from outside kjit reaches on
these shapes, as a fraction of dense, next to the fraction issue 28 asks of fused_moe (0.8).

    python3 bench/python/moe_grouped_mm.py [rounds]

Needs the kjit package (PYTHONPATH, KJIT_C_LIBRARY), torch with `_grouped_mm`, and an sm_90 GPU.
On the fine-grained layer grouped_mm on float16 ran 1.4-4x slower than on bfloat16 (H100 and
H200, torch 2.11), so the bfloat16 rows are the anchor. Each layer first runs fused_moe and the
dense GEMMs for WARM_S seconds: the figures are the card's steady state under its power cap.
Routing: distinct experts per token uniformly at random, positive weights summing to 1 per token,
a fresh seed each run (printed). Ways timed in turns, bursts of about 10 ms each (CYCLES,
BURST_S), so that the card's clock is the same for all; a round's bursts are queued back to back,
each between two CUDA events, with one wait at the end (ms_queued_in_turns), so that no burst
starts from an idle device; a way's time in a round is its median burst:
- kjit fused_moe: the whole layer (routing given);
- torch layer on grouped_mm: sort the pairs by expert, gather x's rows, grouped_mm gate-up,
  silu(gate) * up, grouped_mm down, times the routing weight, index_add_ into the output;
- grouped_mm gate-up alone and down alone, on rows already sorted;
- dense, each GEMM alone: torch's F.linear and kjit.ops.linear, [pairs, hidden] x [2 inter,
  hidden]^T (gate-up) and [pairs, inter] x [hidden, inter]^T (down), one expert's weights over
  every pair's row. A GEMM is shown as a fraction of the dense GEMM of its FLOPs, a layer of the
  two dense GEMMs' sum.
Before timing, fused_moe's output (poisoned with NaN) and the torch layer's are checked against a
float32 evaluation of the layer; a miss is printed and exits 1.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_torch import cuda_torch, ms_queued_in_turns  # noqa: E402
from moe_torch import LAYERS, moe_loop  # noqa: E402

TOKENS = 4096
# Seconds each layer runs before its rounds. An H100 or H200 boosts for about a second, then both
# fused_moe and the dense GEMMs run against the 700 W power cap at 1.3-1.5 GHz; the rounds time
# that steady state, where a cool card's first round flatters whichever way runs first
# (BENCHMARKS.md, "fused_moe prefill under the power cap").
WARM_S = 4.0
# Each round: this many cycles, each a burst of about BURST_S seconds of every way in turn, so
# that every way sees the same clock; a way's time is its median burst.
CYCLES, BURST_S = 15, 0.01


def burst_of(torch, run):
    """`run` repeated for about BURST_S seconds, as one call, and its count of runs."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    torch.cuda.synchronize()
    count = max(1, round(BURST_S / (time.perf_counter() - start)))

    def burst():
        for _ in range(count):
            run()
    return burst, count


def warm(torch, runs):
    """The runs in turn for WARM_S seconds."""
    until = time.monotonic() + WARM_S
    while time.monotonic() < until:
        for run in runs:
            run()
        torch.cuda.synchronize()


def grouped_mm_of(torch):
    import torch.nn.functional as F

    grouped = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)
    if grouped is None:
        print(f"no result: torch {torch.__version__} has no grouped_mm")
        raise SystemExit(0)
    return grouped


def routing(torch, tokens, experts, top_k):
    ids = torch.rand(tokens, experts, device="cuda").argsort(dim=1)[:, :top_k]
    weights = torch.rand(tokens, top_k, device="cuda") + 0.1
    return ids.int().contiguous(), (weights / weights.sum(dim=1, keepdim=True)).contiguous()


class Layer:
    """One layer's tensors, its routing sorted by expert, and each way of running it."""

    def __init__(self, torch, grouped_mm, experts, top_k, hidden, inter, dtype):
        self.torch, self.grouped_mm, self.inter = torch, grouped_mm, inter
        self.w13 = torch.empty(experts, 2 * inter, hidden, device="cuda", dtype=dtype)
        self.w13.uniform_(-hidden ** -0.5, hidden ** -0.5)
        self.w2 = torch.empty(experts, hidden, inter, device="cuda", dtype=dtype)
        self.w2.uniform_(-inter ** -0.5, inter ** -0.5)
        self.x = torch.empty(TOKENS, hidden, device="cuda", dtype=dtype).uniform_(-1, 1)
        self.ids, self.weights = routing(torch, TOKENS, experts, top_k)
        pairs = TOKENS * top_k
        self.flops = 6.0 * pairs * hidden * inter
        # grouped_mm's groups: each expert's pairs, consecutive; offs the end of each group.
        flat = self.ids.flatten().long()
        self.order = flat.argsort(stable=True)
        self.token_of = self.order // top_k
        self.offs = torch.bincount(flat, minlength=experts).cumsum(0).int()
        self.w13_kn, self.w2_kn = self.w13.transpose(1, 2), self.w2.transpose(1, 2)
        self.sorted_x = self.x[self.token_of].contiguous()
        self.sorted_h = torch.empty(pairs, inter, device="cuda", dtype=dtype).uniform_(-1, 1)
        # The dense GEMMs of the same FLOPs, as kjit_moe_gpu_bench's Dense.
        self.dense_a = torch.empty(pairs, hidden, device="cuda", dtype=dtype).uniform_(-1, 1)
        self.dense_h = self.sorted_h.clone()
        self.out = torch.empty_like(self.x)

    def grouped_gate_up(self):
        return self.grouped_mm(self.sorted_x, self.w13_kn, offs=self.offs)

    def grouped_down(self):
        return self.grouped_mm(self.sorted_h, self.w2_kn, offs=self.offs)

    def torch_layer(self):
        import torch.nn.functional as F

        gate_up = self.grouped_mm(self.x[self.token_of], self.w13_kn, offs=self.offs)
        h = F.silu(gate_up[:, :self.inter]) * gate_up[:, self.inter:]
        y = self.grouped_mm(h, self.w2_kn, offs=self.offs)
        y = y * self.weights.flatten()[self.order, None].to(y.dtype)
        return self.torch.zeros_like(self.x).index_add_(0, self.token_of, y)

    def kjit_layer(self, kjit_ops):
        return kjit_ops.fused_moe(self.x, self.weights, self.ids, self.w13, self.w2, out=self.out)

    def torch_dense_gate_up(self):
        return self.torch.nn.functional.linear(self.dense_a, self.w13[0])

    def torch_dense_down(self):
        return self.torch.nn.functional.linear(self.dense_h, self.w2[0])

    def kjit_dense_gate_up(self, kjit_ops):
        return kjit_ops.linear(self.dense_a, self.w13[0])

    def kjit_dense_down(self, kjit_ops):
        return kjit_ops.linear(self.dense_h, self.w2[0])

    def misses(self, kjit_ops):
        """The ways whose output misses float32's by more than 2% of its largest value."""
        torch = self.torch
        want = moe_loop(torch, self.x.float(), self.w13.float(), self.w2.float(), self.ids.long(),
                        self.weights)
        bound = 0.02 * want.abs().max().item()
        self.out.fill_(float("nan"))
        self.kjit_layer(kjit_ops)
        missed = []
        for name, got in (("kjit fused_moe", self.out), ("torch grouped_mm layer",
                                                           self.torch_layer())):
            error = (got.float() - want).abs().max().item()  # NaN (unwritten) misses too
            if not error <= bound:
                missed.append(f"{name}: error {error} over the bound {bound}")
        return missed


def main():
    torch = cuda_torch()
    grouped_mm = grouped_mm_of(torch)
    import kjit.ops as kjit_ops

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seed = torch.seed()
    print(f"seed {seed}, {TOKENS} tokens, {rounds} rounds\n")
    print("| layer | type | round | way | ms | TFLOP/s | of kjit dense | of torch dense |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    missed = []
    for name, experts, top_k, hidden, inter in LAYERS:
        for dtype in (torch.bfloat16, torch.float16):
            layer = Layer(torch, grouped_mm, experts, top_k, hidden, inter, dtype)
            type_name = str(dtype).replace("torch.", "")
            try:
                layer_misses = layer.misses(kjit_ops)
            except RuntimeError as error:  # grouped_mm refusing the type
                print(f"| {name} | {type_name} | | grouped_mm refused: {error} | | | | |")
                continue
            missed += [f"{name} {type_name}, {miss}" for miss in layer_misses]
            # (way, what it computes: the layer, its gate-up GEMM or its down GEMM)
            ways = [("kjit fused_moe", lambda: layer.kjit_layer(kjit_ops), "layer"),
                    ("torch layer on grouped_mm", layer.torch_layer, "layer"),
                    ("grouped_mm gate-up alone", layer.grouped_gate_up, "gate-up"),
                    ("grouped_mm down alone", layer.grouped_down, "down"),
                    ("torch dense gate-up", layer.torch_dense_gate_up, "gate-up"),
                    ("torch dense down", layer.torch_dense_down, "down"),
                    ("kjit dense gate-up", lambda: layer.kjit_dense_gate_up(kjit_ops), "gate-up"),
                    ("kjit dense down", lambda: layer.kjit_dense_down(kjit_ops), "down")]
            flops = {"layer": layer.flops, "gate-up": layer.flops * 2 / 3, "down": layer.flops / 3}
            warm(torch, [ways[0][1], ways[-2][1], ways[-1][1]])
            bursts = [burst_of(torch, way) for _, way, _ in ways]
            for round_index in range(rounds):
                ms = ms_queued_in_turns(torch, [burst for burst, _ in bursts], CYCLES)
                seconds = [m * 1e-3 / count for m, (_, count) in zip(ms, bursts)]
                # The dense GEMMs of each part's FLOPs, each timed alone in this round.
                kjit_dense = {"gate-up": seconds[6], "down": seconds[7]}
                torch_dense = {"gate-up": seconds[4], "down": seconds[5]}
                for dense in (kjit_dense, torch_dense):
                    dense["layer"] = dense["gate-up"] + dense["down"]
                for (way_name, _, part), s in zip(ways, seconds):
                    print(f"| {name} | {type_name} | {round_index} | {way_name} | {s * 1e3:.3f} "
                          f"| {flops[part] / s * 1e-12:.0f} | {kjit_dense[part] / s:.2f} "
                          f"| {torch_dense[part] / s:.2f} |", flush=True)
            del layer
            torch.cuda.empty_cache()
    for miss in missed:
        print(miss)
    if missed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
