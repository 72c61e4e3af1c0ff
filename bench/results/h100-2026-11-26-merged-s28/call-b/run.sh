#!/usr/bin/env bash
# Merged check s28, call B: call A's filter outran its 400 s with --gtest_brief (no progress shown),
# so each suite here runs alone with its own limit and its full output summarised.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
suite() { # suite NAME LIMIT FILTER
  local start=$(date +%s)
  timeout $2 $B/bin/kjit_ops_gpu_tests --gtest_filter="$3" >$OUT/$1.log 2>&1
  echo "$1 rc=$? in $(( $(date +%s) - start )) s: $(grep -c '^\[       OK \]' $OUT/$1.log) ok, $(grep -c '^\[  FAILED  \]' $OUT/$1.log) failed lines, $(grep -c '^\[  SKIPPED \]' $OUT/$1.log) skipped"
  grep -E '^\[  FAILED  \]|tests ran' $OUT/$1.log | head -8; grep -B2 -A10 'Failure' $OUT/$1.log | head -30
  grep -E '^\[ RUN      \]' $OUT/$1.log | tail -1
}
suite paged 110 'Paged*'
suite moe 150 'Moe*'
suite flash 200 'FlashAttention*'
suite gemm 90 'GemmGpuTest/2.Transposed*:GemmGpuTest/2.Linear*:GemmGpuTest/2.ATuningRecord*'
