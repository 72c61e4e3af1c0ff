#!/usr/bin/env bash
# s33 call B: GATHER 2 with LEAD (how many grids' widths of tiles ahead the copies run): the GPU
# checks, then the heuristic (GATHER 2, LEAD 4) against GATHER=0 (a moe_gather pass) and LEAD 1, 8.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step tests 300 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/1.GroupedGemm*:MoeGpuTest/*.SmallLayers*:MoeGpuTest/*.GatheringAsWorkItems*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED|OK) +\]|tests from .* ran' $OUT/tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' -A3 $OUT/tests.log | head -30 >> $OUT/steps.txt
for c in GATHER=0 LEAD=8 LEAD=1; do step prefill_$c 60 $B/bench/kjit_moe_gpu_bench --prefill fine $c; done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv >> $OUT/steps.txt
cat $OUT/steps.txt
for c in GATHER=0 LEAD=8 LEAD=1; do echo "-- $c"; grep -E '\| 4096 \|' $OUT/prefill_$c.log | grep -E "gate-up GEMM alone \||layer" | grep bfloat16 | cut -d'|' -f4,6-10; done
