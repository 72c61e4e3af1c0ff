#!/usr/bin/env bash
# s37 call H: DEFER 1: a tile's outputs packed in registers after its mainloop and stored a box a
# k-block under the next tile's MMAs (the epilogue that call G's PROBE showed exposed). The grouped
# GEMM's test with DEFER 1 forms (second type only, for time), then --prefill fine DEFER=1 twice.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
s=$(date +%s)
LD_LIBRARY_PATH=$PWD/$B/lib timeout 200 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/1.GroupedGemm*' > $OUT/grouped_test.log 2>&1
echo "grouped test exit $? in $(( $(date +%s) - s )) s"; grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]|Failure" $OUT/grouped_test.log | head -8
for i in 1 2; do
  f=$OUT/prefill_defer_$i.log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine DEFER=1 > $f 2>&1; echo "prefill $i exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'GEMM alone \||layer: (fused_moe \||its)' | cut -d'|' -f3,5-10
done
