#!/usr/bin/env bash
# pre4 (issue 27): the attention bench (main's kernel as "before"), torch's SDPA backends, then
# the FlashAttention GPU tests, in one call.
D=.dev-pre4
B=$D/bundle
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
KJIT_ATTENTION_BEFORE=$D/flash_attention_main.hip timeout 150 $B/bench/kjit_attention_gpu_bench
echo "bench exit $?"
timeout 70 python3 bench/python/attention_torch.py
echo "torch exit $?"
timeout 170 $B/bin/kjit_ops_gpu_tests --gtest_filter='*FlashAttention*' --gtest_brief=1 2>&1 | tail -25
echo "gtest exit ${PIPESTATUS[0]}"
