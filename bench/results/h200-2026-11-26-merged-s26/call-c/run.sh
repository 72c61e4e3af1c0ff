#!/usr/bin/env bash
# Merged check, call C (after moe4, skinny5 and the tuning-record fix): the GEMM, FP8 and MoE GPU
# tests, the Python package's GPU tests, linear() beside F.linear, the MoE layer's figures.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
start=$(date +%s)
timeout 200 $B/bin/kjit_ops_gpu_tests --gtest_brief=1 --gtest_filter='GemmGpuTest*:GemmFp8*:Moe*' >$OUT/ops_gpu.log 2>&1; echo "ops rc=$? in $(( $(date +%s) - start )) s"
grep -E '^\[  (PASSED|FAILED|  SKIPPED) |FAILED|tests ran' $OUT/ops_gpu.log | tail -12
grep -B2 -A10 'Failure' $OUT/ops_gpu.log | head -40
echo "== python"; timeout 150 tools/gpu-check --run-python $OUT/py >$OUT/py.log 2>&1; echo "rc=$?"
grep -hE '[0-9]+ (passed|failed)' $OUT/py/*.log | tail -3; grep -hE '^(FAILED|ERROR) ' $OUT/py/*.log | head
echo "== linear"
PYTHONUNBUFFERED=1 timeout 80 python3 bench/python/skinny_fp8_torch.py --linear >$OUT/linear_torch.txt 2>&1; echo "rc=$?"
KJIT_BENCH_LINEAR_ONLY=1 timeout 100 $B/bench/kjit_gemm_gpu_bench --skinny-fp8 >$OUT/linear_kjit.txt 2>&1; echo "rc=$?"
grep 'torch F.linear |' $OUT/linear_torch.txt | awk -F'|' '{print $3,$4,$5,$6}'
grep -E '^\| (bfloat16|half) ' $OUT/linear_kjit.txt | awk -F'|' '{print $2,$3,$4,$5}'
echo "== moe"; timeout 90 $B/bench/kjit_moe_gpu_bench >$OUT/moe.log 2>&1; echo "rc=$?"; tail -30 $OUT/moe.log
