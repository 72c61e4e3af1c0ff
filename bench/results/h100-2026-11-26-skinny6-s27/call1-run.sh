#!/usr/bin/env bash
# skinny6 call 1: gemm_wgmma's variants at 128 rows (K split in four with 128-row tiles of W,
# pairs of tiles of the activations sharing W: new in the sweep), linear() beside F.linear at
# every m (the committed heuristic of main), and the transposed variants' GPU test.
D=.dev-skinny6; B=$D/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
KJIT_BENCH_LINEAR_M=128 KJIT_BENCH_WGMMA_SWEEP=1 KJIT_BENCH_LINEAR_ONLY=1 timeout 120 stdbuf -oL \
  $B/bench/kjit_gemm_gpu_bench --skinny-fp8 >$OUT/sweep128.txt 2>&1
echo "sweep rc=$? $(( $(date +%s) - s )) s"
grep -E '^\| (bfloat16|half) ' $OUT/sweep128.txt | awk -F'|' '{print $2,$3,$4,$5,$10,$11}'
for t in bfloat16 half; do for kn in "4096 x 4096" "8192 x 8192" "14336 x 4096"; do
  echo "== $t $kn"; grep "wgmma variant | $t | $kn " $OUT/sweep128.txt | sort -t'|' -k7 -n | head -6 | awk -F'|' '{print $6,$7}'
done; done
s=$(date +%s)
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so timeout 150 \
  python3 $D/gemm_torch.py --linear >$OUT/linear.txt 2>&1
echo "linear rc=$? $(( $(date +%s) - s )) s"; cat $OUT/linear.txt | cut -c1-160
s=$(date +%s)
timeout 100 $B/bin/kjit_ops_gpu_tests --gtest_brief=1 --gtest_filter='GemmGpuTest*Transposed*' >$OUT/tests.txt 2>&1
echo "tests rc=$? $(( $(date +%s) - s )) s"; grep -E 'PASSED|FAILED|tests ran' $OUT/tests.txt | head; grep -B3 -A8 Failure $OUT/tests.txt | head -30
