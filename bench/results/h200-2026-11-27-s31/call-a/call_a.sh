#!/usr/bin/env bash
# s31 call A (H200): linear() at 128 rows of 8192 x 8192 in cuBLAS's layout (pairs of blocks
# sharing 128-row tiles of W): correctness, the sweep beside the previous variant, F.linear
# beside it; then moe11's unrun GPU checks (every MoeGpuTest, --gather-pass).
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step gemm_tests 200 $B/bin/kjit_ops_gpu_tests --gtest_filter='GemmGpuTest*Transposed*:GemmGpuTest*Linear*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/gemm_tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' $OUT/gemm_tests.log | head -8 >> $OUT/steps.txt
step linear 120 python3 bench/python/gemm_torch.py --linear 64,128 8192x8192
step sweep 150 env KJIT_BENCH_LINEAR_WEIGHTS=8192x8192 KJIT_BENCH_LINEAR_M=128 KJIT_BENCH_WGMMA_SWEEP=1 \
  KJIT_BENCH_LINEAR_ONLY=1 $B/bench/kjit_gemm_gpu_bench --skinny-fp8
step kernels 60 python3 .dev-s31/kernels.py
step linear_again 120 python3 bench/python/gemm_torch.py --linear 64,128 8192x8192
step moe_tests 300 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/moe_tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' $OUT/moe_tests.log | head -8 >> $OUT/steps.txt
step gather_pass 90 $B/bench/kjit_moe_gpu_bench --gather-pass
cat $OUT/steps.txt
tail -14 $OUT/linear.log
grep -E 'wgmma variant|^\| (bfloat16|half)' $OUT/sweep.log | sort -t'|' -k7 -g | head -40
cut -c1-300 $OUT/kernels.log | grep -v Warn
tail -14 $OUT/linear_again.log
tail -25 $OUT/gather_pass.log
