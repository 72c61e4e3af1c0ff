#!/usr/bin/env bash
# Merged check, call A (H100): the mutation check of the dependent-launch test, the GPU tests of
# what changed, the Python package's GPU tests, the MoE and FP8 benchmarks.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step mutant 120 $B/bin/kjit_ops_gpu_tests_nowait --gtest_filter='*LinearWaits*'
step tests 330 $B/bin/kjit_ops_gpu_tests --gtest_filter='*LinearWaits*:Moe*:GemmFp8*'
grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) +\]' $OUT/mutant.log $OUT/tests.log | sort | uniq -c | sort -rn | head -5 >> $OUT/steps.txt
grep -E 'FAILED|Failure' $OUT/mutant.log | head -8 >> $OUT/steps.txt
step python 200 tools/gpu-check --run-python $OUT/py
step moe_bench 150 $B/bench/kjit_moe_gpu_bench
step fp8_torch 120 env PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit python3 bench/python/gemm_fp8_torch.py
cat $OUT/steps.txt
grep -E 'passed|failed' $OUT/py/python_gpu_tests.log | tail -3
tail -30 $OUT/moe_bench.log
tail -16 $OUT/fp8_torch.log
