"""torch's scaled_dot_product_attention on the shapes kjit_attention_gpu_bench measures
(FlashAttention-3's prefill protocol: 16k tokens as sequences of 1k, 4k and 16k, 16 heads of
dim 128, bf16, causal and not, plus GQA 32/8), one row per backend (flash, cuDNN, efficient,
each forced with sdpa_kernel). q, k and v are [batch, seqlen, heads, 128] tensors seen as
[batch, heads, seqlen, 128], the layout kjit's [tokens, heads, 128] arrays have. FLOPs as
FlashAttention counts them. Times with CUDA events: the median of 5 batches. Prints one table.

    python3 bench/python/attention_torch.py [SEQLEN [BACKENDS]]
        # SEQLEN: that sequence length's rows alone (0: every row); BACKENDS: those of
        # flash,cudnn,efficient alone (for rounds interleaved with kjit's at one row)
"""
import math
import sys

from gemm_torch import median_ms  # bench/python, this script's directory


def main():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'backend':<10} {'seqlen':<8} {'heads':<6} {'kv':<6} {'causal':<8} {'ms':>10} {'TFLOP/s':>10}")
    tokens, head_dim = 16384, 128
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    only = int(sys.argv[1]) if len(sys.argv) > 1 and int(sys.argv[1]) else None
    if len(sys.argv) > 2:
        backends = [entry for entry in backends if entry[0] in sys.argv[2].split(",")]
    for seqlen, q_heads, kv_heads in ((1024, 16, 16), (4096, 16, 16), (16384, 16, 16), (4096, 32, 8)):
        if only is not None and seqlen != only:
            continue
        batch = tokens // seqlen
        q = torch.rand(batch, seqlen, q_heads, head_dim, device="cuda", dtype=torch.bfloat16) * 2 - 1
        k = torch.rand(batch, seqlen, kv_heads, head_dim, device="cuda", dtype=torch.bfloat16) * 2 - 1
        v = torch.rand(batch, seqlen, kv_heads, head_dim, device="cuda", dtype=torch.bfloat16) * 2 - 1
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for causal in (False, True):
            flops = 4.0 * tokens * seqlen * q_heads * head_dim / (2.0 if causal else 1.0)
            launches = max(1, int(1e14 / flops))
            for name, backend in backends:
                def run():
                    with sdpa_kernel(backend):
                        F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                       scale=1 / math.sqrt(head_dim),
                                                       enable_gqa=q_heads != kv_heads)
                try:
                    ms = median_ms(torch, run, launches)
                    figure = f"{ms:>10.4f} {flops / ms / 1e9:>10.1f}"
                except RuntimeError as error:
                    figure = f"unsupported: {str(error).splitlines()[0][:80]}"
                print(f"{name:<10} {seqlen:<8} {q_heads:<6} {kv_heads:<6} {'yes' if causal else 'no':<8} {figure}")


if __name__ == "__main__":
    main()
