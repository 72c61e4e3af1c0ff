#!/usr/bin/env bash
# s35 call E: --prefill fine with fused_moe itself routed evenly (every expert's run whole tiles:
# the whole layer with no padding, its passes included) beside the layer as routed at random and
# the dense GEMMs, in alternating bursts at the power cap.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
s=$(date +%s); timeout 200 $B/bench/kjit_moe_gpu_bench --prefill fine > $OUT/prefill_fine.log 2>&1; echo "prefill exit $? in $(( $(date +%s) - s )) s"
kill $SMI
grep -E '\| 4096 \| [0-9] \|' $OUT/prefill_fine.log | grep -E 'layer' | cut -d'|' -f3,5-10
