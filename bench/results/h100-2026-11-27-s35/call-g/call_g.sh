#!/usr/bin/env bash
# s35 call G: the grouped GEMM's tuning record taken whole (AGroupedGemmTuningRecordIsTakenWhole)
# with the heuristic naming SKIP_PADDING (build/gpu-bundle) and without (build/gpu-bundle-nofix,
# the same tree with that one line removed), then the MoE GPU tests on the kept tree.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
for B in build/gpu-bundle-nofix build/gpu-bundle; do
  LD_LIBRARY_PATH=$PWD/$B/lib timeout 60 $B/bin/kjit_ops_gpu_tests --gtest_filter='*TuningRecordIsTakenWhole*' > $OUT/record_$(basename $B).log 2>&1
  echo "$B record test exit $?"
  grep -E "^\[ +(OK|FAILED) +\]|Error|exception" $OUT/record_$(basename $B).log | head -6
done
B=build/gpu-bundle
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 400 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*:MoeFp8GpuTest*' > $OUT/moe_tests.log 2>&1; echo "moe tests exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|tests ran" $OUT/moe_tests.log | head -20
