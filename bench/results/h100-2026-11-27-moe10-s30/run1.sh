#!/usr/bin/env bash
# moe10 call 1, from the bundle's folder: the bench's --prefill (SKIP_PADDING 1 against 0, three
# rounds), then the grouped GEMM's GPU test and the MoE GPU tests; nvidia-smi's clocks first.
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,driver_version --format=csv 2>&1 | tee $OUT/gpu.txt
start=$(date +%s)
timeout 210 bench/kjit_moe_gpu_bench --prefill 2>&1 | tee $OUT/prefill1.log
echo "prefill rc=$? after $(( $(date +%s) - start )) s" | tee -a $OUT/prefill1.log
timeout 110 bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*' --gtest_brief=1 2>&1 | tee $OUT/tests1.log
echo "tests rc=$? after $(( $(date +%s) - start )) s" | tee -a $OUT/tests1.log
