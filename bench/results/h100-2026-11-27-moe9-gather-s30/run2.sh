#!/usr/bin/env bash
# moe9 call 2: the --gather rounds with GATHER 2 (the first warp copies) beside GATHER 1, then
# the grouped-GEMM GPU test (GATHER 2 added to its forms).
set -o pipefail
cd "$(dirname "$0")"
export KJIT_CACHE_DIR=/tmp/moe9-cache
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv 2>&1 | tee $OUT/device.txt
date +%s > $OUT/t0
timeout 150 bundle/bench/kjit_moe_gpu_bench --gather 2>&1 | tee $OUT/gather-call2.log
echo "gather rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
timeout 100 bundle/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*GroupedGemm*' 2>&1 | tee $OUT/tests-call2.log
echo "tests rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
