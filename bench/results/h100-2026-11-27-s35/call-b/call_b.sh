#!/usr/bin/env bash
# s35 call B: the gate-up GEMM gathering the tokens' rows in its loads (GATHER 1, static order,
# no moe_gather pass) at 4096 tokens under the power cap, in alternating bursts with the
# heuristic's pass + TMA form and the dense GEMMs; GROUP_M 4 (the heuristic's) and 8.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
for c in "GATHER=1" "GATHER=1 GROUP_M=8"; do
  f=$OUT/prefill_$(echo $c | tr ' =' '_-').log
  s=$(date +%s); timeout 200 $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "prefill $c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'bfloat16' | grep -E 'layer|GEMM alone \||dense' | cut -d'|' -f5-10
  grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'half' | grep -E 'layer' | cut -d'|' -f5-10
done
kill $SMI
