#!/bin/bash
# moe8 call 2: GATHER 3 (128 threads issue the row boxes) beside GATHER 2 and the baseline.
set -o pipefail
cd "$(dirname "$0")/bundle"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > $OUT/device2.txt 2>&1
export KJIT_CACHE_DIR=/tmp/kc
S=$SECONDS
timeout 150 bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.GroupedGemm*' 2>&1 | tee $OUT/tests2.log
echo "== rc $? ($((SECONDS - S))s)" | tee -a $OUT/tests2.log
S=$SECONDS
timeout 150 bench/kjit_moe_gpu_bench --gather2 2>&1 | tee $OUT/gather2_2.log
echo "== rc $? ($((SECONDS - S))s)" | tee -a $OUT/gather2_2.log
