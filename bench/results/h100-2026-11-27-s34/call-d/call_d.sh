#!/usr/bin/env bash
# s34 call D: the steady ratio under the power cap, and a copy's power.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python:$PWD/bench/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,clocks.max.mem --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
timeout 200 python3 .dev-s34/power.py 2>&1 | tee $OUT/power.log; echo "exit $?"
kill $SMI
python3 .dev-s34/phases.py $OUT/power.log $OUT/smi.csv
