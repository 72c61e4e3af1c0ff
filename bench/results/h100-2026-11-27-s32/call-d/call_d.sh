#!/usr/bin/env bash
# s32 call D: CLUSTER_M 2 with the pair's tile handed over by a mailbox: checked
# (bfloat16's grouped GEMM test), then timed against the heuristic alone and in the layer.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
$B/bin/kjit_ops_gpu_tests --gtest_list_tests | grep -B1 -i grouped | head -4 >> $OUT/steps.txt
step tests 240 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/1.GroupedGemm*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure|CLUSTER_M' $OUT/tests.log | head -12 >> $OUT/steps.txt
step prefill 150 $B/bench/kjit_moe_gpu_bench --prefill fine CLUSTER_M=2
step prefill_mixtral 150 $B/bench/kjit_moe_gpu_bench --prefill mixtral CLUSTER_M=2
cat $OUT/steps.txt
grep -h 'grids' $OUT/prefill*.log | cut -c1-200
grep -E '\| 4096 \|' $OUT/prefill.log | grep -v "layer: dense" | cut -d'|' -f3,5-10
grep -E 'layer: ' $OUT/prefill.log | grep -v '| 4096 |' | grep -v dense | cut -d'|' -f3-10
grep -E '\| 4096 \|' $OUT/prefill_mixtral.log | grep -v "layer: dense" | cut -d'|' -f3,5-10
