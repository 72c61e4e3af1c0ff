#!/usr/bin/env bash
# skinny7 call 2: linear() beside F.linear from CUDA graphs (gemm_torch.py --linear) under three
# heuristics at 64 and 128 rows of 4096 x 4096 (main's; pairs of blocks as cuBLAS; two tiles
# without pairs at 64 rows), then the committed one at 32, 64 and 128 rows of all three
# weights, then the transposed and linear() GPU tests.
D=.dev-skinny7; B=$D/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/$B/python
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
for lib in base pairs twotiles base; do
  s=$(date +%s); f=$lib; [ -f $OUT/lin-$lib.txt ] && f=$lib-again
  [ $lib = pairs ] && so=libkjit_c.so || so=libkjit_c-$lib.so
  KJIT_C_LIBRARY=$PWD/$B/lib/$so timeout 60 python3 $D/gemm_torch.py --linear 64,128 4096x4096 >$OUT/lin-$f.txt 2>&1
  echo "== $f rc=$? $(( $(date +%s) - s )) s"; grep -E '^\| 4096|agree|error|Error' $OUT/lin-$f.txt | cut -c1-140
done
s=$(date +%s)
KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so timeout 100 python3 $D/gemm_torch.py --linear 32,64,128 >$OUT/lin-all.txt 2>&1
echo "== all rc=$? $(( $(date +%s) - s )) s"; grep -E '^\| [0-9]|error|Error' $OUT/lin-all.txt | cut -c1-140
s=$(date +%s)
timeout 150 $B/bin/kjit_ops_gpu_tests --gtest_brief=1 --gtest_filter='GemmGpuTest*Transposed*:GemmGpuTest*LinearMatches*' >$OUT/tests.txt 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s"; grep -E 'PASSED|FAILED|tests ran|SKIPPED' $OUT/tests.txt | head; grep -B3 -A8 Failure $OUT/tests.txt | head -30
