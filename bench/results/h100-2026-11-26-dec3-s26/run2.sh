#!/bin/bash
# paged decode (dec3), run 2: the torch bench alone (GPU tests passed in run 1 on the same C++),
# main's kernels as "before", and this branch's kernel with and without the table lookahead at
# main's launch geometry.
D=.dev-dec3
B=$D/bundle
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
export PYTHONPATH=$B/python:bench/python KJIT_C_LIBRARY=$B/lib/libkjit_c.so PYTHONUNBUFFERED=1
export KJIT_ATTENTION_BEFORE=$D/attention_decode_main.hip:$D/kv_cache_main.hip
export KJIT_DECODE_SOURCES=dec3S3=$D/dec3.hip,noprefetchS3=$D/noprefetch.hip
timeout ${BENCH_TIMEOUT:-240} python3 -W ignore $D/paged_attention_torch.py 2>&1 | tee $OUT/bench.log
echo "bench rc=$?"
