#!/usr/bin/env bash
# pre4 (issue 27), call 2: the FlashAttention GPU tests, then the 1k rows again (main's kernel as
# "before") beside torch's SDPA backends.
D=.dev-pre4
B=$D/bundle
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
timeout 270 $B/bin/kjit_ops_gpu_tests --gtest_filter='*FlashAttention*' --gtest_brief=1 2>&1 | grep -v '^\[ *SKIPPED\|Skipped' | tail -30
echo "gtest exit ${PIPESTATUS[0]}"
KJIT_ATTENTION_SEQLEN=1024 KJIT_ATTENTION_BEFORE=$D/flash_attention_main.hip timeout 60 $B/bench/kjit_attention_gpu_bench
echo "bench exit $?"
PYTHONPATH=bench/python timeout 45 python3 $D/attention_torch.py 1024
echo "torch exit $?"
