#!/usr/bin/env bash
# s36 call C: 192-row tiles, second form (static order, loader state in shared memory, metadata by cp.async) in fused_moe's prefill GEMMs.
# The grouped GEMM test (both tile shapes, poisoned padding) and the MoE GPU tests, then the
# table and --prefill fine with HEAD's bundle (build/gpu-bundle-head) and this one alternately.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
B=build/gpu-bundle
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 240 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*GroupedGemmGathering*:MoeGpuTest*MixtralLike*' > $OUT/moe_tests.log 2>&1; echo "moe tests exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $OUT/moe_tests.log | head -12
for i in 1 2; do for B in build/gpu-bundle-head build/gpu-bundle; do
  f=$OUT/prefill_$(basename $B)_$i.log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 120 $B/bench/kjit_moe_gpu_bench --prefill fine > $f 2>&1; echo "$B run $i exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||layer: (fused|its)' | cut -d'|' -f5-10
done; done
