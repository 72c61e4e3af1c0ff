#!/usr/bin/env bash
# moe9 call 1: the --gather rounds (decisive), the MoE GPU tests, then main's and the branch's
# plain bench (16 / 256 tokens: GATHER 1 there already) in the same call.
set -o pipefail
cd "$(dirname "$0")"
export KJIT_CACHE_DIR=/tmp/moe9-cache
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv 2>&1 | tee $OUT/device.txt
date +%s > $OUT/t0
timeout 170 bundle/bench/kjit_moe_gpu_bench --gather 2>&1 | tee $OUT/gather1.log
echo "gather rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
timeout 160 bundle/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*' 2>&1 | tee $OUT/tests1.log
echo "tests rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
LD_LIBRARY_PATH=$PWD/bundle/lib timeout 90 main/bench/kjit_moe_gpu_bench 2>&1 | tee $OUT/main_bench1.log
echo "main bench rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
timeout 90 bundle/bench/kjit_moe_gpu_bench 2>&1 | tee $OUT/branch_bench1.log
echo "branch bench rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
