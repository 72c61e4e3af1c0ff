#!/usr/bin/env bash
# Merged check, call A: kjit_ops_gpu_tests whole, then the MoE layer's figures.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
start=$(date +%s)
timeout 480 $B/bin/kjit_ops_gpu_tests --gtest_brief=1 >$OUT/ops_gpu.log 2>&1; echo "ops rc=$? in $(( $(date +%s) - start )) s"
grep -E '^\[  (PASSED|FAILED|  SKIPPED) |FAILED|tests ran' $OUT/ops_gpu.log | tail -25
grep -B2 -A12 'Failure' $OUT/ops_gpu.log | head -60
