#!/bin/bash
# paged decode / KV write (dec2): GPU tests, then the torch bench (with main's kernels as "before").
D=.dev-dec2
B=$D/bundle
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
timeout 200 $B/bin/kjit_ops_gpu_tests --gtest_filter="${GTEST:-PagedAttention*}" > $OUT/gtest.log 2>&1
echo "gtest rc=$?"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED)|Failure|Expected|Which|got" $OUT/gtest.log | head -40
export PYTHONPATH=$B/python:bench/python KJIT_C_LIBRARY=$B/lib/libkjit_c.so PYTHONUNBUFFERED=1
export KJIT_ATTENTION_BEFORE=$D/attention_decode_main.hip:$D/kv_cache_main.hip
timeout ${BENCH_TIMEOUT:-330} python3 -W ignore $D/paged_attention_torch.py 2>&1 | tee $OUT/bench.log
echo "bench rc=$?"
