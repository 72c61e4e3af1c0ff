#!/usr/bin/env bash
# s34 call J: the grouped GEMMs' tile order (GROUP_M 16 and 4 against the heuristic's 8) at the
# power cap, in --prefill's alternating bursts.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
for c in GROUP_M=16 GROUP_M=4; do
  s=$(date +%s); timeout 150 $B/bench/kjit_moe_gpu_bench --prefill fine $c > $OUT/prefill_${c#GROUP_M?}.log 2>&1; echo "$c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \|' $OUT/prefill_${c#GROUP_M?}.log | grep -E 'layer: its|GEMM alone \| ' | cut -d'|' -f3,5-10
done
