#!/usr/bin/env bash
# s31 call B (H100): linear() at every m beside F.linear (the 128-row pairs on 128-row tiles of W
# at 8192 x 8192 included), the old and new variants swept there, the transposed GEMM tests; the
# MoE bench's modes through the shared LayerLaunches (--prefill, --gather-pass) and its table.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step linear 120 python3 bench/python/gemm_torch.py --linear
step sweep 150 env KJIT_BENCH_LINEAR_WEIGHTS=8192x8192 KJIT_BENCH_LINEAR_M=128 KJIT_BENCH_WGMMA_SWEEP=1 \
  KJIT_BENCH_LINEAR_ONLY=1 $B/bench/kjit_gemm_gpu_bench --skinny-fp8
step linear_again 60 python3 bench/python/gemm_torch.py --linear 64,128 8192x8192
step gemm_tests 200 $B/bin/kjit_ops_gpu_tests --gtest_filter='GemmGpuTest*Transposed*:GemmGpuTest*Linear*'
grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]|tests from .* ran' $OUT/gemm_tests.log >> $OUT/steps.txt
grep -E 'FAILED|Failure' $OUT/gemm_tests.log | head -8 >> $OUT/steps.txt
step moe_bench 120 $B/bench/kjit_moe_gpu_bench
step prefill 200 $B/bench/kjit_moe_gpu_bench --prefill
step gather_pass 60 $B/bench/kjit_moe_gpu_bench --gather-pass fine
cat $OUT/steps.txt
cat $OUT/linear.log | tail -52
grep -E '^\| (bfloat16|half) |SW1 BM64 BN128 SK1 ST8 CM1 CN1|SW0 BM128 BN64 SK1 ST8 CM1 CN1 ' $OUT/sweep.log
tail -6 $OUT/linear_again.log
grep -E '\| 4096 \|' $OUT/moe_bench.log
grep -E 'layer: ' $OUT/prefill.log | grep '| 4096 |' | cut -c1-200
grep -E 'check|layer: ' $OUT/gather_pass.log | cut -c1-200
