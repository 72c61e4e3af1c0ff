#!/usr/bin/env bash
# s34 call F: call D's steady ratio again (bf16, then fp16), a second card's run.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python:$PWD/bench/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,clocks.max.mem --format=csv,noheader
for t in bfloat16 float16; do
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 100 > $OUT/smi_$t.csv 2>&1 &
  SMI=$!
  timeout 120 python3 .dev-s34/power.py $t 2>&1 | tee $OUT/power_$t.log; echo "exit $?"
  kill $SMI
  python3 .dev-s34/phases.py $OUT/power_$t.log $OUT/smi_$t.csv
done
