#!/usr/bin/env bash
# Merged check, call B (H200): linear() at every m with gemm_wgmma as a dependent launch, the MoE
# layers, the FP8 forms, each beside torch or kjit's dense GEMM in the same process.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step linear 300 python3 bench/python/gemm_torch.py --linear
step moe_bench 150 $B/bench/kjit_moe_gpu_bench
step fp8_torch 120 python3 bench/python/gemm_fp8_torch.py
cat $OUT/linear.log | tail -60
grep 'fine-grained.*4096\|Mixtral.*4096' $OUT/moe_bench.log
head -8 $OUT/fp8_torch.log
