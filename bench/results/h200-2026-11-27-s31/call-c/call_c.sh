#!/usr/bin/env bash
# s31 call C (H200): linear() at every m of the three weights beside F.linear (after the 128-row
# pairs on 128-row tiles of W), and the MoE table.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step linear 120 python3 bench/python/gemm_torch.py --linear
step moe_bench 120 $B/bench/kjit_moe_gpu_bench
cat $OUT/steps.txt
grep -E '^\| [0-9]' $OUT/linear.log | awk -F'|' '{printf "%s %s %s g=%s e=%s\n",$2,$3,$4,$7,$10}'
grep -E '\| 4096 \|' $OUT/moe_bench.log
