#!/usr/bin/env bash
# s35 call D: bench/python/moe_grouped_mm.py with every round's bursts queued between CUDA events
# (one wait a round), after its warm-up; nvidia-smi sampling clocks and power beside it.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/$B/python:$PWD/bench/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
timeout 300 python3 bench/python/moe_grouped_mm.py 3 > $OUT/moe_grouped_mm.log 2>&1; echo "exit $?"
kill $SMI
grep -E 'fine-grained.*bfloat16|misses|error|Error' $OUT/moe_grouped_mm.log | head -40
grep -E 'kjit fused_moe' $OUT/moe_grouped_mm.log
awk -F', ' '$2+0 > 400 {n++; c+=$2; p+=$3; if ($5 != "0x0000000000000000") t++} END {printf "busy samples %d: mean SM clock %.0f MHz, mean power %.0f W, %d with a throttle reason\n", n, c/n, p/n, t}' $OUT/smi.csv
