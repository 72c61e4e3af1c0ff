#!/usr/bin/env bash
# moe9 call 4: --gather with fused_moe's gate-up GEMM gathering by GATHER 2 (tokens preloaded, one
# arrival a warp); GATHER 1 and 2 timed beside the pass + GATHER 0.
set -o pipefail
cd "$(dirname "$0")"
export KJIT_CACHE_DIR=/tmp/moe9-cache
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv 2>&1 | tee $OUT/device.txt
date +%s > $OUT/t0
timeout 45 bundle/bench/kjit_moe_gpu_bench --gather 2>&1 | tee $OUT/gather-call4.log
echo "gather rc $? at $(( $(date +%s) - $(cat $OUT/t0) )) s" | tee -a $OUT/device.txt
