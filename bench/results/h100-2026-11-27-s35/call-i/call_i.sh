#!/usr/bin/env bash
# s35 call I: a tuning record's winner applied by detail::with_winner in fused_moe's grouped GEMM
# and gemm_fp8 (a tunable the record leaves out takes the template's default): the MoE, FP8 GEMM
# and tuning GPU tests.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
B=build/gpu-bundle
nvidia-smi --query-gpu=name --format=csv,noheader
s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 520 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*:*Fp8*:Tuning*' > $OUT/tests.log 2>&1; echo "tests exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|Failure|TemplatesDefaults" $OUT/tests.log | head -20
