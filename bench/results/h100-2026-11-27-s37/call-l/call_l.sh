#!/usr/bin/env bash
# s37 call L (timing probe, outputs NOT stored): PROBE 4 is PROBE 3 (the epilogue's work in
# shared memory, no copy-engine stores) without its proxy fences (fence.proxy.async.shared::cta).
# --prefill fine PROBE=4, then PROBE=3 (both GEMMs), bf16 rows shown.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
for c in PROBE=4 PROBE=3; do
  f=$OUT/prefill_$(echo $c | tr '=' '-').log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "$c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||layer: its' | cut -d'|' -f5-10
done
