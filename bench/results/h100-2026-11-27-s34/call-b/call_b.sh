#!/usr/bin/env bash
# s34 call B: does fused_moe slow as the card warms, and why (clocks, power, throttle reasons)?
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python:$PWD/bench/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 200 > $OUT/smi.csv 2>&1 &
SMI=$!
date +%H:%M:%S.%N
timeout 200 python3 .dev-s34/drift.py 2>&1 | tee $OUT/drift.log; echo "exit $?"
kill $SMI
awk -F, 'NR%10==2' $OUT/smi.csv | head -60
