#!/usr/bin/env bash
# s32 call E (H200): the MoE bench's --prefill on main (ae93f63): the grouped GEMMs against the
# dense GEMM, SKIP_PADDING 0 against the heuristic, and each GEMM on one expert's weights.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step prefill 150 $B/bench/kjit_moe_gpu_bench --prefill fine
step prefill_bad_arg 10 $B/bench/kjit_moe_gpu_bench --prefill fine SKIP_PADDING=x
cat $OUT/steps.txt $OUT/prefill_bad_arg.log
grep -E '\| 4096 \|' $OUT/prefill.log | grep -v "layer: dense" | cut -d'|' -f3,5-10
