#!/bin/bash
# dec5 run: PagedAttention GPU tests, the Python graph/decode tests, the exploration, the quick bench.
D=.dev-dec5
B=$D/bundle
set -o pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
export PYTHONPATH=$B/python:bench/python KJIT_C_LIBRARY=$B/lib/libkjit_c.so PYTHONUNBUFFERED=1
timeout 150 $B/bin/kjit_ops_gpu_tests --gtest_filter='PagedAttention*' --gtest_brief=1 2>&1 | tee $OUT/gtest.log | tail -15
echo "gtest rc=$?"
deps=""; python3 -c 'import pytest' 2>/dev/null || deps=":$B/python/deps"
PYTHONPATH=$B/python$deps KJIT_TEST_INSTALLED=1 KJIT_CLI=$B/bin/kjit timeout 150 python3 -m pytest -q -rs -p no:cacheprovider $B/python/tests/test_gpu_attention_moe.py -k "paged or capture" 2>&1 | tee $OUT/pytest.log | tail -8
echo "pytest rc=$?"
KJIT_DECODE_SOURCES=l2hint=$D/l2hint.hip timeout 200 python3 -W ignore $D/explore_dec5.py 2>&1 | tee $OUT/explore.log
echo "explore rc=$?"
KJIT_ATTENTION_BEFORE=$D/main_decode.hip:$D/main_kv.hip KJIT_BENCH_QUICK=1 timeout 150 python3 -W ignore bench/python/paged_attention_torch.py 2>&1 | tee $OUT/bench.log
echo "bench rc=$?"
