#!/usr/bin/env bash
# s37 call B: GATHER 2 (warps 1-3 of the gate-up GEMM's producer warpgroup fill the sorted rows
# under the MMAs; no moe_gather pass). Correctness: the grouped GEMM test (GATHER 2 forms, the
# sorted rows checked bit for bit). Timing: --prefill fine GATHER=2, twice, bf16 rows shown.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
s=$(date +%s)
LD_LIBRARY_PATH=$PWD/$B/lib timeout 240 $B/bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.GroupedGemm*' > $OUT/grouped_test.log 2>&1
echo "grouped test exit $? in $(( $(date +%s) - s )) s"; grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]|Failure|differ" $OUT/grouped_test.log | head -20
for i in 1 2; do
  f=$OUT/prefill_gather2_$i.log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine GATHER=2 > $f 2>&1; echo "prefill $i exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep bfloat16 | grep -E 'GEMM alone \||layer: (fused_moe \||its)|dense' | cut -d'|' -f5-10
done
