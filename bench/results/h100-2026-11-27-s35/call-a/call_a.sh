#!/usr/bin/env bash
# s35 call A: CLUSTER_M 2 in moe_gemm_wgmma (pairs of tiles sharing an expert's weight rows by
# multicast): the grouped GEMM test against double precision, then --prefill fine with it as the
# candidate (and with GROUP_M 2), fused_moe and the dense GEMMs in alternating bursts.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
s=$(date +%s); timeout 150 $B/bin/kjit_ops_gpu_tests --gtest_filter='*GroupedGemm*:*MoeGpuTest*MixtralLike*' > $OUT/test.log 2>&1; echo "test exit $? in $(( $(date +%s) - s )) s"
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $OUT/test.log | head -20
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
s=$(date +%s); timeout 200 $B/bench/kjit_moe_gpu_bench --prefill fine CLUSTER_M=2 > $OUT/prefill_c2.log 2>&1; echo "prefill c2 exit $? in $(( $(date +%s) - s )) s"
grep -E '\| 4096 \| [0-9] \|' $OUT/prefill_c2.log | grep bfloat16 | cut -d'|' -f5-10
s=$(date +%s); timeout 200 $B/bench/kjit_moe_gpu_bench --prefill fine CLUSTER_M=2 GROUP_M=2 > $OUT/prefill_c2g2.log 2>&1; echo "prefill c2g2 exit $? in $(( $(date +%s) - s )) s"
grep -E '\| 4096 \| [0-9] \|' $OUT/prefill_c2g2.log | grep bfloat16 | cut -d'|' -f5-10
kill $SMI
