#!/usr/bin/env bash
# s38 call B: SWAP 2 (timing only) -- an expert's full tile and its last tile (pairs within its
# first 48 rows) as one unit of 176 token rows, the tokens as wgmma's N, so that the weights
# stream once for both -- against SWAP 1 (the same kernel's tiles, gate and up as two wgmma of
# 128 columns, 56 KiB stages, no units) and STAGES=3 (the heuristic's form at 3 stages), each
# against the heuristic in the same bursts. First the SASS of SWAP 2's wgmma.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
cuobjdump -sass .dev-s38/swap2.cubin > $OUT/swap2.sass 2>&1; echo "cuobjdump exit $?"
grep -o 'HGMMA\.[0-9x]*\.[A-Z0-9.]*' $OUT/swap2.sass | sort | uniq -c
grep -c 'STL\|LDL' $OUT/swap2.sass
B=build/gpu-bundle
for c in "STAGES=3" "STAGES=3 SWAP=1" "STAGES=3 SWAP=2"; do
  f=$OUT/prefill_$(echo $c | tr ' =' '_-').log
  s=$(date +%s); LD_LIBRARY_PATH=$PWD/$B/lib timeout 170 stdbuf -oL $B/bench/kjit_moe_gpu_bench --prefill fine $c > $f 2>&1; echo "== $c: exit $? in $(( $(date +%s) - s )) s"
  grep -E 'bfloat16 \| 4096 \| [0-9] \|' $f | grep -E 'GEMM alone \||layer: (fused_moe \||its)' | cut -d'|' -f5-8,10
done
