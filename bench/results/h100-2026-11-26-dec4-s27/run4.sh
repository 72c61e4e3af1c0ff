#!/bin/bash
# paged decode (dec4), run 4: the PagedAttention GPU tests on the final code (main's two launches
# and the new two-calls-on-one-workspace case).
B=.dev-dec4/bundle
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv | tee $OUT/device.txt
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
timeout 150 $B/bin/kjit_ops_gpu_tests --gtest_filter='PagedAttention*' --gtest_brief=1 2>&1 | tee $OUT/gtest.log
echo "gtest rc=${PIPESTATUS[0]}"
