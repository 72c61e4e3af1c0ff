#!/bin/bash
# moe7 call 2: the branch (bundle/: align launched plainly, COUNT variants) and main (base/).
set -o pipefail
cd "$(dirname "$0")"
D=$PWD
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/device.txt 2>&1
run() { # name dir timeout args...
  local name=$1 dir=$2 t=$3; shift 3
  echo "== $name: $*" | tee -a $OUT/$name.log
  (cd $D/$dir && KJIT_CACHE_DIR=/tmp/kc-$dir timeout $t "$@") 2>&1 | tee -a $OUT/$name.log
  echo "== rc $? (${SECONDS}s)" | tee -a $OUT/$name.log
}
run tests bundle 150 bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.SmallLayers*:MoeGpuTest/*.Align*:MoeGpuTest/*.MixtralLike*:MoeGpuTest/*.GroupedGemm*' --gtest_brief=1
run tests bundle 60 bin/kjit_ops_gpu_tests --gtest_filter='MoeGpuTest/*.SmallLayers*' --gtest_repeat=3 --gtest_brief=1
run bench bundle 100 bench/kjit_moe_gpu_bench
run bench base 100 bench/kjit_moe_gpu_bench
run breakdown bundle 100 bench/kjit_moe_gpu_bench --breakdown
