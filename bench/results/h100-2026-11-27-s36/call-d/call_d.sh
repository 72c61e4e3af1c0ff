#!/usr/bin/env bash
# s36 call D: where call C's --prefill with the second 192-row form stopped (line-buffered output).
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
B=build/gpu-bundle
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine > $OUT/prefill.log 2>&1; echo "prefill exit $? in $(( $(date +%s) - s )) s"
grep -c "" $OUT/prefill.log; tail -4 $OUT/prefill.log | cut -c1-200
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 100 stdbuf -oL $B/bench/kjit_moe_gpu_bench > $OUT/table.log 2>&1; echo "table exit $? in $(( $(date +%s) - s )) s"
grep -E "4096" $OUT/table.log | cut -c1-220
