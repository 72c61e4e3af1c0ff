#!/usr/bin/env bash
# s38 call C: SKIP_PADDING 2 -- a half tile's pairs computed with the tokens as wgmma's N (16 to
# 64, both consumers; the down GEMM up to 16 pairs) in place of consumer 0's 64 rows. The grouped
# GEMM's test with its SKIP_PADDING 2 forms (both types), then --prefill fine SKIP_PADDING=2
# twice and --prefill mixtral SKIP_PADDING=2 once.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
s=$(date +%s)
LD_LIBRARY_PATH=$PWD/$B/lib timeout 240 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.GroupedGemm*' > $OUT/grouped_test.log 2>&1
echo "grouped test exit $? in $(( $(date +%s) - s )) s"; grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]|Failure" $OUT/grouped_test.log | head -12
for run in "fine 1" "fine 2" "mixtral 1"; do
  set -- $run
  f=$OUT/prefill_$1_$2.log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 170 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill $1 SKIP_PADDING=2 > $f 2>&1; echo "== $run: exit $? in $(( $(date +%s) - s )) s"
  grep -E 'bfloat16 \| 4096 \| [0-9] \|' $f | grep -E 'GEMM alone \||layer: (fused_moe \||its)' | cut -d'|' -f5-8,10
  grep -E 'half \| 4096 \| 0 \|' $f | grep -E 'GEMM alone \||layer: its' | cut -d'|' -f5-8,10
done
