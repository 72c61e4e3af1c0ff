#!/bin/bash
# dec5 run 2: the Python paged tests (the split decode in a CUDA graph among them), the goal shapes
# through kjit.ops (PDL merge) against direct launches again, deeper rings at batch 1 x 32k.
D=.dev-dec5
B=$D/bundle
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
export PYTHONPATH=$B/python:bench/python KJIT_C_LIBRARY=$B/lib/libkjit_c.so PYTHONUNBUFFERED=1
deps=""; python3 -c 'import pytest' 2>/dev/null || deps=":$B/python/deps"
PYTHONPATH=$B/python$deps KJIT_TEST_INSTALLED=1 KJIT_CLI=$B/bin/kjit timeout 120 python3 -m pytest -q -rs -p no:cacheprovider $B/python/tests/test_gpu_attention_moe.py -k "paged or capture" 2>&1 | tee $OUT/pytest.log | tail -3
echo "pytest rc=$?"
KJIT_DECODE_RING_SOURCE=$D/attention_decode.hip timeout 150 python3 -W ignore $D/explore_dec5.py goals rings 2>&1 | tee $OUT/explore2.log
echo "explore rc=$?"
