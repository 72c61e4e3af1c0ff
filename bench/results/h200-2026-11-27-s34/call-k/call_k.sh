#!/usr/bin/env bash
# s34 call K: call I with each burst timed between device events, queued back to back (the
# table and --prefill), after a warm-up to the power cap's steady state.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
s=$(date +%s); timeout 200 $B/bench/kjit_moe_gpu_bench --prefill fine > $OUT/prefill_fine.log 2>&1; echo "prefill exit $? in $(( $(date +%s) - s )) s"
s=$(date +%s); timeout 240 $B/bench/kjit_moe_gpu_bench > $OUT/moe_bench.log 2>&1; echo "table exit $? in $(( $(date +%s) - s )) s"
kill $SMI
grep -E '\| 4096 \|' $OUT/prefill_fine.log | grep -E 'layer|dense' | cut -d'|' -f3,5-10
grep -E '\| 4096 \| [0-9] \| (gate-up|down) GEMM alone \|' $OUT/prefill_fine.log | cut -d'|' -f3,5-10
grep -E '4096' $OUT/moe_bench.log
