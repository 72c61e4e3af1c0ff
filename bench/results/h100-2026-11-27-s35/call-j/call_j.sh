#!/usr/bin/env bash
# s35 call J (review): one second_half_skipped() for the producer's and consumer 1's test of a
# half tile, and --prefill's even routing built once: the MoE GPU tests, then --prefill fine.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib
nvidia-smi --query-gpu=name --format=csv,noheader
s=$(date +%s); timeout 330 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*' > $OUT/tests.log 2>&1; echo "tests exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED" $OUT/tests.log | head
s=$(date +%s); timeout 120 $B/bench/kjit_moe_gpu_bench --prefill fine > $OUT/prefill_fine.log 2>&1; echo "prefill exit $? in $(( $(date +%s) - s )) s"
grep -E '\| 4096 \| [0-9] \|' $OUT/prefill_fine.log | grep bfloat16 | grep -E 'layer|evenly \|' | cut -d'|' -f5-10
