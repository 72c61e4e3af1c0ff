#!/usr/bin/env bash
# s37 call C (timing experiment, gate-up outputs NOT the products): SWAP 1 runs an expert's last
# two tiles of rows as one of 128 + r token rows, tokens as wgmma's N, so that the weights stream
# once for both. --prefill fine SWAP=1, twice (the down GEMM keeps the heuristic's form).
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
B=build/gpu-bundle
for i in 1 2; do
  f=$OUT/prefill_swap_$i.log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 150 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine SWAP=1 > $f 2>&1; echo "prefill $i exit $? in $(( $(date +%s) - s )) s"
  grep -E '\| 4096 \| [0-9] \|' $f | grep -E 'GEMM alone \||layer: (fused_moe \||its)|dense' | cut -d'|' -f3,5-10
done
