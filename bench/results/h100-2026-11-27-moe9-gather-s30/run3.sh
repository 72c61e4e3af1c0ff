#!/usr/bin/env bash
# moe9 call 3: --gather with GATHER 2 = GATHER 1 + tokens preloaded + one arrival a warp, then
# the grouped-GEMM GPU test (bfloat16; its forms include GATHER 2).
set -o pipefail
cd "$(dirname "$0")"
export KJIT_CACHE_DIR=/tmp/moe9-cache
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv 2>&1 | tee $OUT/device.txt
date +%s > $OUT/t0
timeout 100 bundle/bench/kjit_moe_gpu_bench --gather 2>&1 | tee $OUT/gather-call3.log
echo "gather rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
timeout 60 bundle/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/1.GroupedGemm*' 2>&1 | tee $OUT/tests-call3.log
echo "tests rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
