#!/usr/bin/env bash
# Merged check, call B: every GPU test binary but kjit_ops_gpu_tests, the Python package's GPU
# tests, and linear() as a user calls it beside F.linear.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
for t in kjit_device_tests kjit_gpu_tests kjit_jit_tests; do
  echo "== $t"; timeout 200 $B/bin/$t --gtest_brief=1 >$OUT/$t.log 2>&1; echo "rc=$?"
  grep -E '^\[  (PASSED|FAILED|  SKIPPED) |FAILED|tests ran' $OUT/$t.log | tail -8
done
echo "== python"; timeout 260 tools/gpu-check --run-python $OUT/py >$OUT/py.log 2>&1; echo "rc=$?"
tail -5 $OUT/py.log; cat $OUT/py/report.md | tail -8
grep -hE '(passed|failed|error)' $OUT/py/*.log | tail -6
grep -hE '^(FAILED|ERROR) ' $OUT/py/*.log | head -20
echo "== linear"
PYTHONUNBUFFERED=1 timeout 100 python3 bench/python/skinny_fp8_torch.py --linear >$OUT/linear_torch.txt 2>&1; echo "rc=$?"
KJIT_BENCH_LINEAR_ONLY=1 timeout 150 $B/bench/kjit_gemm_gpu_bench --skinny-fp8 >$OUT/linear_kjit.txt 2>&1; echo "rc=$?"
cat $OUT/linear_torch.txt | tail -60; cat $OUT/linear_kjit.txt | grep -v 'wgmma variant' | tail -80
