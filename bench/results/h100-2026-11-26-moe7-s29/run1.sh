#!/bin/bash
# moe7 call: main (base/) and the branch (bundle/) on one H100, same machine.
set -o pipefail
cd "$(dirname "$0")"
D=$PWD
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > $OUT/device.txt 2>&1
run() { # name dir timeout args...
  local name=$1 dir=$2 t=$3; shift 3
  echo "== $name: $*" | tee -a $OUT/$name.log
  (cd $D/$dir && KJIT_CACHE_DIR=/tmp/kc-$dir timeout $t "$@") 2>&1 | tee -a $OUT/$name.log
  echo "== rc $? (${SECONDS}s)" | tee -a $OUT/$name.log
}
run bench base 150 bench/kjit_moe_gpu_bench
run bench bundle 150 bench/kjit_moe_gpu_bench
run breakdown base 150 bench/kjit_moe_gpu_bench --breakdown
run breakdown bundle 150 bench/kjit_moe_gpu_bench --breakdown
run tests bundle 240 bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*:MoeFp8GpuTest/*.EmptyExperts*' --gtest_brief=1
run prefill bundle 120 bench/kjit_moe_gpu_bench --prefill
run bench base 150 bench/kjit_moe_gpu_bench
run bench bundle 150 bench/kjit_moe_gpu_bench
