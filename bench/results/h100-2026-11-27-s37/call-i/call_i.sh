#!/usr/bin/env bash
# s37 call I (timing probe, outputs NOT stored where they belong): PROBE 2 stores every
# tile of the grouped GEMMs onto rows 0-127 of C (which stay in L2), PROBE 1 skips the epilogue:
# what the outputs' writes to memory cost. --prefill fine PROBE=2, then PROBE=1 (both GEMMs).
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
for c in PROBE=2 PROBE=1; do
  f=$OUT/prefill_$(echo $c | tr '=' '-').log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "$c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||layer: its' | cut -d'|' -f5-10
done
