#!/usr/bin/env bash
# Merged check (this session): kjit_ops_gpu_tests whole, then the Python package's GPU tests.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
start=$(date +%s)
timeout 420 $B/bin/kjit_ops_gpu_tests --gtest_brief=1 >$OUT/ops_gpu.log 2>&1; echo "ops rc=$? in $(( $(date +%s) - start )) s"
grep -E '^\[  (PASSED|FAILED|  SKIPPED) |FAILED|tests ran' $OUT/ops_gpu.log | tail -25
grep -B2 -A12 'Failure' $OUT/ops_gpu.log | head -60
echo "== python"; start=$(date +%s)
KJIT_GPU_CHECK_TIMEOUT=130 timeout 140 tools/gpu-check --run-python $OUT/py >$OUT/py.log 2>&1; echo "rc=$? in $(( $(date +%s) - start )) s"
tail -5 $OUT/py.log
grep -hE '(passed|failed|error)' $OUT/py/*.log | tail -6
grep -hE '^(FAILED|ERROR) |fakes_of_the_new' $OUT/py/*.log | head -20
