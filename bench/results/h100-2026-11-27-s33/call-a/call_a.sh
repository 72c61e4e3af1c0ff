#!/usr/bin/env bash
# s33 call A: GATHER 2 (the gate-up GEMM gathering its rows as work items of the dynamic order)
# checked (the grouped GEMM test, the layers), then timed against GATHER 0 after a moe_gather pass.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step tests 280 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/1.GroupedGemm*:MoeGpuTest/*.SmallLayers*:MoeGpuTest/*.GatheringAsWorkItems*:MoeGpuTest/*.Align*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED|OK) +\]|tests from .* ran' $OUT/tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' -A3 $OUT/tests.log | head -30 >> $OUT/steps.txt
step prefill 120 $B/bench/kjit_moe_gpu_bench --prefill fine GATHER=0
step bench 150 $B/bench/kjit_moe_gpu_bench
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv >> $OUT/steps.txt
cat $OUT/steps.txt
grep -E '\| 4096 \|' $OUT/prefill.log | cut -d'|' -f3,5-10
grep -E '4096' $OUT/bench.log
