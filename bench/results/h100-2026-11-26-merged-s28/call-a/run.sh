#!/usr/bin/env bash
# Merged check s28, call A: the GPU tests of what this round changed (flash_attention's STAGE_O,
# the paged decode's PDL merge, the grouped GEMM's shared-memory epilogue, linear's cluster pairs),
# the runtime's launch path (kjit_gpu_tests, kjit_device_tests: cuLaunchKernelEx for PDL).
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
for bin in kjit_gpu_tests kjit_device_tests; do
  start=$(date +%s)
  timeout 90 $B/bin/$bin --gtest_brief=1 >$OUT/$bin.log 2>&1; echo "$bin rc=$? in $(( $(date +%s) - start )) s"
  grep -E 'tests ran|PASSED|FAILED' $OUT/$bin.log | tail -4
done
start=$(date +%s)
timeout 400 $B/bin/kjit_ops_gpu_tests --gtest_brief=1 \
  --gtest_filter='FlashAttention*:Paged*:Moe*:GemmGpuTest*Transposed*:GemmGpuTest*Linear*:GemmGpuTest*ATuningRecord*' >$OUT/ops_gpu.log 2>&1
echo "ops rc=$? in $(( $(date +%s) - start )) s"
grep -E '^\[  (PASSED|FAILED|  SKIPPED) |FAILED|tests ran' $OUT/ops_gpu.log | tail -25
grep -B2 -A12 'Failure' $OUT/ops_gpu.log | head -60
