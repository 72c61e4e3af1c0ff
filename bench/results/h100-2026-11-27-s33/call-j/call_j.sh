#!/usr/bin/env bash
# s33 call J: the MoE bench's --prefill after folding its GEMM-alone rows into one helper (no
# behaviour change): the same rows print.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
timeout 90 $B/bench/kjit_moe_gpu_bench --prefill fine > $OUT/prefill_fine.log 2>&1; echo "exit $?"
grep -E '\| 4096 \| 0 \|' $OUT/prefill_fine.log | grep bfloat16 | cut -d'|' -f6-10
grep -c "GEMM alone" $OUT/prefill_fine.log
