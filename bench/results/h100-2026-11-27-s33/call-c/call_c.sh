#!/usr/bin/env bash
# s33 call C: GATHER 2 with each warp's pairs read at once and the token rows prefetched into L2 as
# a tile of rows is claimed: the GPU checks, then against GATHER=0 (a moe_gather pass), twice.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step tests 300 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/1.GroupedGemm*:MoeGpuTest/*.SmallLayers*:MoeGpuTest/*.GatheringAsWorkItems*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED|OK) +\]|tests from .* ran' $OUT/tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' -A3 $OUT/tests.log | head -30 >> $OUT/steps.txt
for r in 1 2; do step prefill_gather0_$r 60 $B/bench/kjit_moe_gpu_bench --prefill fine GATHER=0; done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv >> $OUT/steps.txt
cat $OUT/steps.txt
for r in 1 2; do echo "-- run $r"; grep -E '\| 4096 \|' $OUT/prefill_gather0_$r.log | grep -E "gate-up GEMM alone \||layer" | cut -d'|' -f3,4,5,6-10; done
