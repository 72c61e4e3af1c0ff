#!/usr/bin/env bash
# s31 call F: the down GEMM in groups of two rows in the dynamic tile order (grouped_group_m):
# --prefill's forms (0: the gate-up's GROUP_M as before, 1: now) alone and in the layer, the
# MoE table, then the layer GPU tests.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step prefill 200 $B/bench/kjit_moe_gpu_bench --prefill
step moe_bench 120 $B/bench/kjit_moe_gpu_bench
if [ "${WITH_TESTS:-1}" = 1 ]; then
  step moe_tests 300 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.MixtralLike*:MoeGpuTest/*.SmallLayers*'
  grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/moe_tests.log >> $OUT/steps.txt
  grep -E 'FAILED|Failure' $OUT/moe_tests.log | head -8 >> $OUT/steps.txt
fi
cat $OUT/steps.txt
grep -E 'GEMM alone|dense linear|layer: ' $OUT/prefill.log | grep '| 4096 |' | cut -d'|' -f2,3,5,6,7,8,10
grep -E '\| 4096 \|' $OUT/moe_bench.log
