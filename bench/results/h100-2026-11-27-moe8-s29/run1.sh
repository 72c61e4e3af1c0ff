#!/bin/bash
# moe8 call 1: the branch's bundle on one H100: the grouped-GEMM and layer GPU tests (GATHER 2
# forms, the layers at 4096 tokens both ways), then --gather2 (GATHER 2 against a moe_gather pass
# + GATHER 0, and fused_moe both ways, three rounds in turn, both layers, both types).
set -o pipefail
cd "$(dirname "$0")/bundle"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > $OUT/device.txt 2>&1
export KJIT_CACHE_DIR=/tmp/kc
S=$SECONDS
timeout 200 bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.GroupedGemm*:MoeGpuTest/*.MixtralLike*' 2>&1 | tee $OUT/tests1.log
echo "== rc $? ($((SECONDS - S))s)" | tee -a $OUT/tests1.log
S=$SECONDS
timeout 230 bench/kjit_moe_gpu_bench --gather2 2>&1 | tee $OUT/gather2.log
echo "== rc $? ($((SECONDS - S))s)" | tee -a $OUT/gather2.log
