#!/usr/bin/env bash
# s36 call E (timing experiment, outputs of merged rows NOT stored): MERGE 1 computes an expert's
# half tile with the tile before it from the same stages of weight rows (its 64 token rows as
# wgmma's N). --prefill fine with STAGES=3 (MERGE's stages; the reference) and MERGE=1 STAGES=3.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
B=build/gpu-bundle
for c in "STAGES=3" "MERGE=1 STAGES=3"; do
  f=$OUT/prefill_$(echo $c | tr ' =' '_-').log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 200 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "$c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||GEMM alone, routed evenly \||layer: (fused_moe \||its)' | cut -d'|' -f5-10
done
