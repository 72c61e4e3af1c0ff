#!/usr/bin/env bash
# moe10 call 2, from the bundle's folder: the grouped GEMM's test (both types) first, then the
# alignment, the small layers and the bfloat16 layers at 1 to 4096 tokens (fused_moe, SKIP_PADDING
# 1 by default), line-buffered so that a timeout still shows what ran.
set -o pipefail
start=$(date +%s)
timeout 150 stdbuf -oL bin/kjit_ops_gpu_tests \
  --gtest_filter='MoeGpuTest/*.GroupedGemm*:MoeGpuTest/*.Align*:MoeGpuTest/*.SmallLayers*:MoeGpuTest/1.MixtralLike*' \
  2>&1 | tee $OUT/tests2.log
echo "tests rc=$? after $(( $(date +%s) - start )) s" | tee -a $OUT/tests2.log
