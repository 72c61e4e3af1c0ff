#!/usr/bin/env bash
# Merged check s30, call A (H100): the GEMM and MoE GPU tests (gemm_wgmma's EPILOGUE 1 through
# store_boxes; moe_gemm_wgmma's SKIP_PADDING), then the MoE layer against dense.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step tests 470 $B/bin/kjit_ops_gpu_tests --gtest_filter='GemmGpuTest*:MoeGpuTest*:MoeFp8GpuTest*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' $OUT/tests.log | head -8 >> $OUT/steps.txt
step moe_bench 90 $B/bench/kjit_moe_gpu_bench
cat $OUT/steps.txt
tail -22 $OUT/moe_bench.log
