#!/usr/bin/env bash
# Merged check s30, call C (H200): the MoE layers against dense (SKIP_PADDING's prefill forms in
# rounds), and linear() beside F.linear at 8192 x 8192, 64 and 128 rows.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step moe_bench 90 $B/bench/kjit_moe_gpu_bench
step moe_prefill 120 $B/bench/kjit_moe_gpu_bench --prefill
step linear 150 python3 bench/python/gemm_torch.py --linear 64,128 8192x8192
cat $OUT/steps.txt
grep -E '\| (4096|256|16) \|' $OUT/moe_bench.log
grep -E 'layer: (fused_moe|dense)' $OUT/moe_prefill.log | grep 'fine-grained' | grep '| 4096 |'
tail -14 $OUT/linear.log
