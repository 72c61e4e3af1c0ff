#!/usr/bin/env bash
# s37 call M (timing probe, outputs NOT stored): PROBE 5 computes and packs the epilogue's values
# and writes nothing (no shared memory, no barriers, no stores); PROBE 1 has no epilogue.
# --prefill fine PROBE=5, then PROBE=1 (both GEMMs), bf16 rows shown.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
for c in PROBE=5 PROBE=1; do
  f=$OUT/prefill_$(echo $c | tr '=' '-').log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "$c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||layer: its' | cut -d'|' -f5-10
done
