#!/usr/bin/env bash
# s33 call H: the down GEMM's half-padding tiles split by columns between both consumers (SPLIT),
# checked (the grouped GEMM test, the small layers), then main's bundle (build/gpu-bundle-main,
# 990c139) and the split one's `--prefill fine` in turn, twice.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
B=build/gpu-bundle
LD_LIBRARY_PATH=$PWD/$B/lib step tests 150 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.GroupedGemm*:MoeGpuTest/*.SmallLayers*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED|OK) +\]|tests from .* ran' $OUT/tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' -A3 $OUT/tests.log | head -30 >> $OUT/steps.txt
for r in 1 2; do
  for form in main split; do
    B=build/gpu-bundle; [ $form = main ] && B=build/gpu-bundle-main
    LD_LIBRARY_PATH=$PWD/$B/lib step prefill_${form}_$r 60 $B/bench/kjit_moe_gpu_bench --prefill fine
  done
done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv >> $OUT/steps.txt
cat $OUT/steps.txt
for f in $OUT/prefill_*.log; do echo "-- $(basename $f)"; grep -E '\| 4096 \|' $f | grep -E "(down GEMM alone|layer: its launches) \| heuristic|dense linear\(\) x2|down: dense" | cut -d'|' -f3,5,6,8-10; done
