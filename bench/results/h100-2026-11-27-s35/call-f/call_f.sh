#!/usr/bin/env bash
# s35 call F: SKIP_PADDING 2 (a half tile's first 64 rows split by columns between the two
# consumers; gated tiles' weight rows copied in halves): the MoE GPU tests against double
# precision, then --prefill fine with SKIP_PADDING=2 as the candidate, at the power cap.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
s=$(date +%s); timeout 330 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*:MoeFp8GpuTest*EmptyExperts*' > $OUT/test.log 2>&1; echo "test exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|tests ran" $OUT/test.log | head -20
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
s=$(date +%s); timeout 200 $B/bench/kjit_moe_gpu_bench --prefill fine SKIP_PADDING=2 > $OUT/prefill_skip2.log 2>&1; echo "prefill exit $? in $(( $(date +%s) - s )) s"
kill $SMI
grep -E '\| (4096|256|16) \| [0-9] \|' $OUT/prefill_skip2.log | grep -E 'layer|GEMM alone \|' | cut -d'|' -f3-10
