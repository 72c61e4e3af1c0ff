#!/bin/bash
# s39 call B: the C++ GPU tests of the paths whose tuning lookup changed (FP8 MoE, gemm_fp8),
# the rest of the MoE suite and TuningGpu; the Python package's test_gpu.py (ops.py changed);
# the torch loop over experts at 1/16/256/4096 tokens.
set -u
B=$PWD/build/gpu-bundle
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
export KJIT_CACHE_DIR=$(mktemp -d)
s=$(date +%s)
timeout 330 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeFp8GpuTest/*:GemmFp8GpuTest.*:MoeGpuTest/*:TuningGpu.*' \
  > $OUT/ops_gpu.log 2>&1; echo "ops rc=$? $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran|FAILED" $OUT/ops_gpu.log | tail -8
s=$(date +%s)
KJIT_GPU_CHECK_TIMEOUT=150 KJIT_GPU_CHECK_PYTHON_TESTS="test_gpu.py" tools/gpu-check --run-python "$OUT/py" > /dev/null 2>&1
echo "py rc=$? $(( $(date +%s) - s )) s"; tail -n 3 "$OUT/py/python_gpu_tests.log"
s=$(date +%s)
PYTHONPATH=$B/python KJIT_C_LIBRARY=$B/lib/libkjit_c.so timeout 100 python3 bench/python/moe_torch.py > $OUT/moe_torch.log 2>&1
echo "moe_torch rc=$? $(( $(date +%s) - s )) s"; tail -n 30 $OUT/moe_torch.log
s=$(date +%s)
timeout 200 stdbuf -oL $B/bench/kjit_moe_gpu_bench > $OUT/moe_bench.log 2>&1
echo "moe_bench rc=$? $(( $(date +%s) - s )) s"; tail -n 40 $OUT/moe_bench.log
