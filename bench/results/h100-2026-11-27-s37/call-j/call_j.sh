#!/usr/bin/env bash
# s37 call J: the grouped GEMMs storing C from registers (EPILOGUE 0, the form before moe6), at
# the cap: --prefill fine EPILOGUE=0 (both GEMMs), bf16 rows shown.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
for c in EPILOGUE=0; do
  f=$OUT/prefill_$(echo $c | tr '=' '-').log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "$c exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||layer: its' | cut -d'|' -f5-10
done
