#!/bin/bash
# pre3 (issue 27 prefill, Q_BUFFERS): flash-attention GPU tests, kjit_attention_gpu_bench, torch's SDPA backends.
D=.dev-pre3
B=$D/gpu-bundle
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
SECONDS=0
timeout ${TEST_TIMEOUT:-150} $B/bin/kjit_ops_gpu_tests --gtest_filter="${GTEST:-*FlashAttention*}" > $OUT/gtest.log 2>&1
echo "gtest rc=$? after ${SECONDS}s"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED)|Failure|Expected|Which|rror" $OUT/gtest.log | head -60
timeout ${BENCH_TIMEOUT:-200} $B/bench/kjit_attention_gpu_bench 2>&1 | tee $OUT/kjit_bench.log
echo "kjit bench rc=$? after ${SECONDS}s"
export PYTHONPATH=bench/python PYTHONUNBUFFERED=1
timeout ${TORCH_TIMEOUT:-120} python3 -W ignore bench/python/attention_torch.py 2>&1 | tee $OUT/torch.log
echo "torch rc=$? after ${SECONDS}s"
