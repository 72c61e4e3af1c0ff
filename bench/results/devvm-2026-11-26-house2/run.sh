#!/bin/sh
# Before/after in one shell: main's kjit_bench (baseline) and house2's, alternated three times.
cd /work/wt/house2
for i in 1 2 3; do
  for b in /work/main/build/release/bench/kjit_bench build/release/bench/kjit_bench; do
    echo "== $b run $i"
    KJIT_CACHE_DIR=$(mktemp -d) $b \
      --benchmark_filter='BM_MemoryHit(BuildingParams)?/nvidia:0$|BM_DiskHitFreshRuntime/nvidia:0$' \
      --benchmark_min_time=0.3 2>&1 | grep BM_
  done
done
uptime
