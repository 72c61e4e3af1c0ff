#!/usr/bin/env bash
# s31 call D (H100): gemm_fp8 after its stages came from the template's own shared-memory count:
# the operator beside torch._scaled_mm (first, on a cool card), then its GPU tests.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step fp8_torch 120 python3 bench/python/gemm_fp8_torch.py
step fp8_tests 240 $B/bin/kjit_ops_gpu_tests --gtest_filter='GemmFp8GpuTest*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/fp8_tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' $OUT/fp8_tests.log | head -8 >> $OUT/steps.txt
cat $OUT/steps.txt
cat $OUT/fp8_torch.log
