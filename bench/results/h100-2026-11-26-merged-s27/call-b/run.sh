#!/usr/bin/env bash
# Merged check, call B: the GPU tests call A's 420 s did not reach, the planted-record test fixed,
# and the Python GPU tests with test_ops_cpu.py's torch fakes.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
start=$(date +%s)
timeout 300 $B/bin/kjit_ops_gpu_tests --gtest_brief=1 \
  --gtest_filter='GemmGpuTest*ATuningRecord*:Moe*:Paged*:Quant*:Rotary*:Rowwise*:Tuning*' >$OUT/ops_gpu.log 2>&1
echo "ops rc=$? in $(( $(date +%s) - start )) s"
grep -E '^\[  (PASSED|FAILED|  SKIPPED) |FAILED|tests ran' $OUT/ops_gpu.log | tail -25
grep -B2 -A12 'Failure' $OUT/ops_gpu.log | head -60
echo "== python"; start=$(date +%s)
KJIT_GPU_CHECK_TIMEOUT=130 timeout 140 tools/gpu-check --run-python $OUT/py >$OUT/py.log 2>&1; echo "rc=$? in $(( $(date +%s) - start )) s"
tail -3 $OUT/py.log
grep -hE '(passed|failed|error)' $OUT/py/*.log | tail -4
grep -hE '^(FAILED|ERROR) |registers no torch' $OUT/py/*.log | head -20
