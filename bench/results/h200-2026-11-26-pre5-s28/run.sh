#!/usr/bin/env bash
# pre5 (issue 27), one device call: flash_attention with the output through shared memory and bulk
# copies (STAGE_O 1, the default for a persistent walk), this source with STAGE_O 0, and main's
# kernel ("before", main's wrapper parameters) beside torch's cuDNN SDPA in three interleaved
# rounds at 1k; then the 4k, 16k and GQA rows once against every SDPA backend; then the
# FlashAttention GPU tests of the contiguous kernels (bfloat16, then half).
D=.dev-pre5
B=$D/bundle
export KJIT_ATTENTION_BEFORE=$D/flash_attention_main.hip PYTHONPATH=bench/python
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
for round in 1 2 3; do
  echo "== round $round"
  KJIT_ATTENTION_SEQLEN=1024 KJIT_ATTENTION_VARIANTS=default,STAGE_O=0,before timeout 90 $B/bench/kjit_attention_gpu_bench
  timeout 40 python3 $D/attention_torch.py 1024 cudnn
done
for n in 4096 16384; do
  echo "== rows of $n"
  KJIT_ATTENTION_SEQLEN=$n KJIT_ATTENTION_VARIANTS=default,STAGE_O=0,STAGE_O=1,before timeout 60 $B/bench/kjit_attention_gpu_bench
  timeout 50 python3 $D/attention_torch.py $n
done
echo "== tests"
timeout 110 $B/bin/kjit_ops_gpu_tests --gtest_filter='FlashAttentionGpuTest/1.*' --gtest_brief=1 2>&1 | tail -15
echo "gtest bfloat16 exit ${PIPESTATUS[0]}"
timeout 90 $B/bin/kjit_ops_gpu_tests --gtest_filter='FlashAttentionGpuTest/0.*' --gtest_brief=1 2>&1 | tail -15
echo "gtest half exit ${PIPESTATUS[0]}"
