"""torch on the layers of kjit_moe_gpu_bench: a mixture-of-experts layer as a loop over the
experts (index the tokens routed to each, F.linear for gate and up, silu(gate) * up, F.linear
down, index_add_ of the weighted outputs), the reference a model without a fused kernel runs.
Same routing (distinct experts per token, uniformly at random), shapes and TFLOP/s count
(6 * pairs * hidden * inter); the time per call is the median of 5 bursts (ops_torch.py's
seconds_per_call), after a check of the loop against an fp32 torch evaluation on one token.

    python3 bench/python/moe_torch.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ops_torch import seconds_per_call  # noqa: E402

LAYERS = [("Mixtral-like E8 top2 4096/14336", 8, 2, 4096, 14336),
          ("fine-grained E64 top6 2048/1408", 64, 6, 2048, 1408)]


def moe_loop(torch, x, w13, w2, ids, weights):
    import torch.nn.functional as F

    inter = w2.shape[2]
    out = torch.zeros_like(x)
    flat_ids = ids.flatten()
    for e in torch.unique(flat_ids).tolist():
        pairs = (flat_ids == e).nonzero().squeeze(1)
        tokens = pairs // ids.shape[1]
        gate_up = F.linear(x[tokens], w13[e])
        h = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        y = F.linear(h, w2[e]) * weights.flatten()[pairs, None].to(x.dtype)
        out.index_add_(0, tokens, y)
    return out


def main():
    import torch

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| layer | tokens | type | ms | TFLOP/s |\n| --- | --- | --- | --- | --- |")
    for name, experts, top_k, hidden, inter in LAYERS:
        for dtype in (torch.bfloat16, torch.float16):
            w13 = torch.empty(experts, 2 * inter, hidden, device="cuda", dtype=dtype)
            w13.uniform_(-hidden ** -0.5, hidden ** -0.5)
            w2 = torch.empty(experts, hidden, inter, device="cuda", dtype=dtype)
            w2.uniform_(-inter ** -0.5, inter ** -0.5)
            for tokens in (1, 16, 256, 4096):
                g = torch.Generator(device="cuda").manual_seed(tokens)
                ids = torch.rand(tokens, experts, device="cuda", generator=g).argsort(dim=1)
                ids = ids[:, :top_k].contiguous()
                weights = torch.full((tokens, top_k), 1.0 / top_k, device="cuda")
                x = torch.empty(tokens, hidden, device="cuda", dtype=dtype).uniform_(-1, 1)
                got = moe_loop(torch, x[:1], w13, w2, ids[:1], weights[:1]).float()
                want = moe_loop(torch, x[:1].float(), w13.float(), w2.float(), ids[:1],
                                weights[:1])
                scale = want.abs().max().item()
                assert (got - want).abs().max().item() <= 0.05 * scale, "loop disagrees with fp32"
                s = seconds_per_call(torch, lambda: moe_loop(torch, x, w13, w2, ids, weights),
                                     statistic=lambda v: sorted(v)[len(v) // 2])
                flops = 6.0 * tokens * top_k * hidden * inter
                print(f"| {name} | {tokens} | {str(dtype).split('.')[-1]} | {s * 1e3:.3f} | "
                      f"{flops / s * 1e-12:.0f} |", flush=True)
            del w13, w2
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
