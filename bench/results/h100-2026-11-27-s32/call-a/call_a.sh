#!/usr/bin/env bash
# s32 call A: the grouped GEMMs' L2 prefetch (PREFETCH) checked and timed against the heuristic.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step tests 200 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*GroupedGemm*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' $OUT/tests.log | head -8 >> $OUT/steps.txt
for p in 4 8 2 16; do step prefill_p$p 120 $B/bench/kjit_moe_gpu_bench --prefill fine PREFETCH=$p; done
cat $OUT/steps.txt
for p in 4 8 2 16; do echo "-- PREFETCH $p"; grep -E '\| 4096 \|' $OUT/prefill_p$p.log | grep -v dense | cut -d'|' -f3,6-10; done
