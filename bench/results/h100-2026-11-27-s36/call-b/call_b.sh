#!/usr/bin/env bash
# s36 call B: GATHER 2 (moe9's coalesced gathering copies with one arrival a warp, now in the
# dynamic tile order) rebased on SKIP_PADDING: the grouped GEMM test with its GATHER 2 forms and
# the layers, then --prefill fine GATHER=2 twice (the gate-up GEMM gathering, the layer without
# the moe_gather pass, against the heuristic's pass + TMA in the same bursts), then mixtral once.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
B=build/gpu-bundle
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 300 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*GroupedGemmGathering*:MoeGpuTest*MixtralLike*' > $OUT/moe_tests.log 2>&1; echo "moe tests exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $OUT/moe_tests.log | head -12
for i in 1 2; do
  f=$OUT/prefill_fine_gather2_$i.log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 120 $B/bench/kjit_moe_gpu_bench --prefill fine GATHER=2 > $f 2>&1; echo "fine run $i exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'GEMM alone \||layer: (fused_moe \||its)' | cut -d'|' -f3,5-10
done
f=$OUT/prefill_mixtral_gather2.log
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 $B/bench/kjit_moe_gpu_bench --prefill mixtral GATHER=2 > $f 2>&1; echo "mixtral exit $? in $(( $(date +%s) - s )) s"
grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'gate-up GEMM alone \||layer: (fused_moe \||its)' | cut -d'|' -f3,5-10
