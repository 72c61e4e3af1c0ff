#!/bin/bash
# moe11's one device call: the --gather bench (fine-grained), the bf16 small-layer GPU test
# (fused_moe with a moe_gather pass at 1100 tokens, poisoned workspace), then the Mixtral-like
# --gather rows while time is left.
set -o pipefail
cd "$(dirname "$0")/bundle"
export KJIT_CACHE_DIR=/tmp/kjit-moe11-cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem --format=csv > $OUT/gpu.txt 2>&1
T0=$SECONDS
timeout 32 ./bench/kjit_moe_gpu_bench --gather fine 2>&1 | tee $OUT/gather_fine.log
echo "gather fine rc=$? after $((SECONDS-T0)) s" | tee -a $OUT/gather_fine.log
T1=$SECONDS
timeout 24 ./bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/1.SmallLayers*' 2>&1 | tee $OUT/tests.log
echo "tests rc=$? after $((SECONDS-T1)) s" | tee -a $OUT/tests.log
LEFT=$((60-SECONDS+T0))
if [ $LEFT -gt 8 ]; then
  T2=$SECONDS
  timeout $LEFT ./bench/kjit_moe_gpu_bench --gather mixtral 2>&1 | tee $OUT/gather_mixtral.log
  echo "gather mixtral rc=$? after $((SECONDS-T2)) s" | tee -a $OUT/gather_mixtral.log
fi
echo "total $((SECONDS-T0)) s"
