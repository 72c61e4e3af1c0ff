#!/bin/bash
# pre3 call 2: the paged GPU tests with PAGED 2's Q_BUFFERS 2 as flash_attention_paged()'s choice.
B=.dev-pre3/gpu-bundle
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
SECONDS=0
timeout 120 $B/bin/kjit_ops_gpu_tests --gtest_filter='*FlashAttentionPaged*' > $OUT/gtest2.log 2>&1
echo "gtest rc=$? after ${SECONDS}s"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED)|Failure|Expected|Which|rror" $OUT/gtest2.log | head -60
