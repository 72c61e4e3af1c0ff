#!/usr/bin/env bash
# s37 call G (timing probe, outputs NOT stored): PROBE 1 skips the grouped GEMMs' epilogue (the
# silu_and_mul and the stores through shared memory): what the epilogue's time is where nothing
# hides it. --prefill fine PROBE=1 (both GEMMs).
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
f=$OUT/prefill_PROBE-1.log
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine PROBE=1 > $f 2>&1; echo "PROBE=1 exit $? in $(( $(date +%s) - s )) s"
grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'GEMM alone|dense|layer: its' | cut -d'|' -f3,5-10
