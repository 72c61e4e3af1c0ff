#!/usr/bin/env bash
# s28 call D: gemm_wgmma as a programmatic dependent launch (LaunchConfig::overlap_previous, the
# kernel's griddepcontrol). The bundle's libkjit_c.so launches with it; libkjit_c-nopdl.so is the
# same source with the flag off (the kernel's griddepcontrol then does nothing). linear() against
# F.linear from CUDA graphs, each library in its own process, in turns; then the GEMM and paged
# decode GPU tests (PDL on), and the decode's check and figures.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/$B/python:$PWD/bench/python
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
lin() { # lin LABEL LIBRARY ROWS WEIGHTS
  local s=$(date +%s)
  KJIT_C_LIBRARY=$PWD/$B/lib/$2 timeout 90 python3 bench/python/gemm_torch.py --linear $3 $4 >>$OUT/linear-$1.txt 2>&1
  echo "== $1 ($2) rows $3 weights ${4:-all}: rc=$? $(( $(date +%s) - s )) s"
  tail -n +1 $OUT/linear-$1.txt | grep -E '^\| [0-9]|agree|error|Error|miss' | tail -$5 | cut -c1-120
}
lin pdl libkjit_c.so 16,64,128 4096x4096 6
lin nopdl libkjit_c-nopdl.so 16,64,128 4096x4096 6
lin pdl libkjit_c.so 16,64,128 4096x4096 6
lin nopdl libkjit_c-nopdl.so 16,64,128 4096x4096 6
lin pdl libkjit_c.so 32,64,128 8192x8192,14336x4096 12
lin nopdl libkjit_c-nopdl.so 32,64,128 8192x8192,14336x4096 12
lin pdl libkjit_c.so 4096 8192x8192 2
lin nopdl libkjit_c-nopdl.so 4096 8192x8192 2
s=$(date +%s)
timeout 150 $B/bin/kjit_ops_gpu_tests --gtest_filter='GemmGpuTest/1.Linear*:GemmGpuTest/2.Linear*:GemmGpuTest/2.Transposed*:GemmGpuTest/2.ATuningRecord*:GemmGpuTest/1.Transposed*:PagedAttentionGpuTest/1.*' >$OUT/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s: $(grep -c '^\[       OK \]' $OUT/tests.log) ok"; grep -E '^\[  FAILED  \]|tests ran|^\[  PASSED' $OUT/tests.log | head; grep -B2 -A10 Failure $OUT/tests.log | head -30
s=$(date +%s)
KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_BENCH_QUICK=1 timeout 60 python3 bench/python/paged_attention_torch.py >$OUT/decode.txt 2>&1; echo "decode rc=$? $(( $(date +%s) - s )) s"
grep -E '^decode|kjit.ops|CUDNN_ATT|best sdpa' $OUT/decode.txt | head -12
