#!/usr/bin/env bash
# s31 call E (H100): the grouped GEMMs in the dynamic tile order at each GROUP_M and at half
# the tile width (kjit_moe_gpu_bench --sweep's new rows), beside the rest of --sweep.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step sweep 300 $B/bench/kjit_moe_gpu_bench --sweep
cat $OUT/steps.txt
grep -E 'dynamic order|the gated rows|sorted rows' $OUT/sweep.log | grep '| 4096 |'
