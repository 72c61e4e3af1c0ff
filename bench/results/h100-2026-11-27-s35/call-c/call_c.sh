#!/usr/bin/env bash
# s35 call C (H100): GROUP_M 8 and 2 against the heuristic's 4 at the cap (--prefill fine), then
# the plain table with every burst between device events (s34's call K ran it on the H200 only).
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
for c in "GROUP_M=8" "GROUP_M=2"; do
  f=$OUT/prefill_$(echo $c | tr ' =' '_-').log
  s=$(date +%s); timeout 150 $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "prefill $c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'layer|GEMM alone \|' | cut -d'|' -f3,5-10
done
s=$(date +%s); timeout 240 $B/bench/kjit_moe_gpu_bench > $OUT/moe_bench.log 2>&1; echo "table exit $? in $(( $(date +%s) - s )) s"
kill $SMI
grep -E '4096' $OUT/moe_bench.log
