#!/usr/bin/env bash
# Merged check s30, call B (H100, warm): the Python package's GPU tests, the MoE prefill forms
# (SKIP_PADDING 0 against 1 in rounds) and where the time goes, the GEMM against torch.matmul.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so KJIT_CLI=$PWD/$B/bin/kjit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step python 200 tools/gpu-check --run-python $OUT/py
step moe_prefill 120 $B/bench/kjit_moe_gpu_bench --prefill
step moe_breakdown 90 $B/bench/kjit_moe_gpu_bench --breakdown
step gemm 120 $B/bench/kjit_gemm_gpu_bench --clusters
step gemm_torch 90 python3 bench/python/gemm_torch.py
cat $OUT/steps.txt
grep -E 'passed|failed' $OUT/py/python_gpu_tests.log | tail -3
grep -iE '4096|8192' $OUT/gemm.log | head -12
grep -iE 'matmul' $OUT/gemm_torch.log | head -8
