#!/bin/bash
# paged decode (dec4), run 3: where the one launch's tail goes. The quick bench of the committed
# kernel with main's as "before", then two sources of it at the same launch: acqrel (the flag's
# release and the merger's acquire as fence.acq_rel.gpu; the SC fence between the flag and the
# reads kept) and nomerge (every block returns after the flag check: timing only, its output is
# unwritten and its fp32 check fails by design).
D=.dev-dec4
B=$D/bundle
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
export PYTHONPATH=$B/python:bench/python KJIT_C_LIBRARY=$B/lib/libkjit_c.so PYTHONUNBUFFERED=1
export KJIT_ATTENTION_BEFORE=$D/attention_decode_main.hip:$D/kv_cache_main.hip KJIT_BENCH_QUICK=1
export KJIT_DECODE_SOURCES=acqrel=$D/acqrel.hip,nomerge=$D/nomerge.hip
timeout ${BENCH_TIMEOUT:-240} python3 -W ignore $D/paged_attention_torch.py 2>&1 | tee $OUT/bench.log
echo "bench rc=$?"
