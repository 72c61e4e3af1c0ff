#!/usr/bin/env bash
# s35 call H: GATHER 0's A copied in halves of 64 rows, the second only where a consumer reads it
# (SKIP_PADDING's half tiles stream 40 KB a stage instead of 48): the MoE GPU tests, then
# --prefill fine with HEAD's bundle (build/gpu-bundle-head) and this one alternately, twice each.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
B=build/gpu-bundle
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 300 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*' > $OUT/moe_tests.log 2>&1; echo "moe tests exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $OUT/moe_tests.log | head -10
for i in 1 2; do for B in build/gpu-bundle-head build/gpu-bundle; do
  f=$OUT/prefill_$(basename $B)_$i.log
  LD_LIBRARY_PATH=$PWD/$B/lib timeout 100 $B/bench/kjit_moe_gpu_bench --prefill fine > $f 2>&1; echo "$B run $i exit $?"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||layer: (fused|its)' | cut -d'|' -f5-10
done; done
