#!/usr/bin/env bash
# s34 call A: fused_moe and torch's grouped_mm (CUTLASS) against the dense GEMMs, same rounds.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python:$PWD/bench/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
timeout 240 python3 bench/python/moe_grouped_mm.py ${ROUNDS:-3} 2>&1 | tee $OUT/moe_grouped_mm.log; echo "exit $?"
