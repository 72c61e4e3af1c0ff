#!/bin/bash
# paged decode (dec4), runs 1 and 2 (the same script): the PagedAttention GPU tests (the two-call case too), then the quick
# bench (no tunables sweeps; the split-count sweep of the one-launch decode), main's kernels as
# "before" (decode kernel, then the merge kernel), in the same process.
D=.dev-dec4
B=$D/bundle
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
timeout 150 $B/bin/kjit_ops_gpu_tests --gtest_filter="${GTEST:-PagedAttention*}" --gtest_brief=1 > $OUT/gtest.log 2>&1
echo "gtest rc=$?"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED)|Failure|Expected|Which|got|did not" $OUT/gtest.log | head -40
export PYTHONPATH=$B/python:bench/python KJIT_C_LIBRARY=$B/lib/libkjit_c.so PYTHONUNBUFFERED=1
export KJIT_ATTENTION_BEFORE=$D/attention_decode_main.hip:$D/kv_cache_main.hip KJIT_BENCH_QUICK=1
timeout ${BENCH_TIMEOUT:-240} python3 -W ignore $D/paged_attention_torch.py 2>&1 | tee $OUT/bench.log
echo "bench rc=$?"
