#!/usr/bin/env bash
# s37 call D (timing experiment, gate-up outputs NOT the products): SWAP as in call C, its tiles'
# roles found by the producer and handed over with the tile (not read again by the consumers);
# SWAP 1 copies the extra token rows in boxes of 8 rows, SWAP 2 in boxes of 64.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
for c in SWAP=1 SWAP=2; do
  f=$OUT/prefill_$(echo $c | tr '=' '-').log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "$c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'gate-up GEMM alone \||layer: its' | cut -d'|' -f5-10
done
