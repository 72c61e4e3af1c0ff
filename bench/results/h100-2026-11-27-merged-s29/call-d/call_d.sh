#!/usr/bin/env bash
# fp8f's open question: does the dependent launch change gemm_fp8 at DeepGEMM's 64- and 128-row
# shapes? The operators against main's variants launched without overlap, in interleaved rounds.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,driver_version --format=csv | tee $OUT/steps.txt
timeout 400 $B/bench/kjit_gemm_gpu_bench --fp8-rounds-skinny 2>&1 | tee $OUT/rounds_skinny.log
echo "exit $?" | tee -a $OUT/steps.txt
