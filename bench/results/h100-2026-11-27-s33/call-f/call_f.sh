#!/usr/bin/env bash
# s33 call F: main (66f140b) plus the --prefill rows routed evenly (every expert 3 whole tiles of
# rows at 4096 fine-grained tokens: no padding, as many tiles as the dense GEMM's), on the experts'
# weights and on expert 0's: how much of the grouped GEMMs' gap to dense is the padding's tiles.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step prefill_fine 90 $B/bench/kjit_moe_gpu_bench --prefill fine
step prefill_mixtral 150 $B/bench/kjit_moe_gpu_bench --prefill mixtral
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv >> $OUT/steps.txt
cat $OUT/steps.txt
for l in fine mixtral; do echo "-- $l"; grep -E '\| 4096 \|' $OUT/prefill_$l.log | grep -E "alone|dense linear\(\) \|" | grep -v SKIP | cut -d'|' -f3,5,6,8-10; grep "routed evenly:" $OUT/prefill_$l.log | head -1; done
