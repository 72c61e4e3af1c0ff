#!/usr/bin/env bash
# s34 call C: GEMM time on zero rows under the power cap.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python:$PWD/bench/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 500 > $OUT/smi.csv 2>&1 &
SMI=$!
timeout 200 python3 .dev-s34/zeros.py 2>&1 | tee $OUT/zeros.log; echo "exit $?"
kill $SMI
awk -F, 'NR%4==2' $OUT/smi.csv | head -40
