#!/usr/bin/env bash
# pre5 (issue 27), call 2, on the final commit 90886a2: flash_attention() takes STAGE_O 1 at every
# row (16k causal too, a block per tile); the GPU tests now also cover that walk's variant (the
# other PERSISTENT with the wrapper's q tiles for it). Bfloat16 tests, then the 16k rows' kjit
# variants (no torch: the budget).
D=.dev-pre5
B=$D/bundle
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
timeout 100 $B/bin/kjit_ops_gpu_tests --gtest_filter='FlashAttentionGpuTest/1.*' --gtest_brief=1 2>&1 | tail -15
echo "gtest bfloat16 exit ${PIPESTATUS[0]}"
KJIT_ATTENTION_SEQLEN=16384 KJIT_ATTENTION_VARIANTS=default,STAGE_O=0 timeout 40 $B/bench/kjit_attention_gpu_bench
