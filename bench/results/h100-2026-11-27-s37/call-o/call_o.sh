#!/usr/bin/env bash
# s37 call O (no GPU work): PROBE 1's and PROBE 5's SASS around their HGMMA instructions (the down
# GEMM), as call N's did not all come back.
set -o pipefail
export KJIT_CACHE_DIR=/tmp/kjit-sass
B=build/gpu-bundle
for p in 1 5; do
  LD_LIBRARY_PATH=$PWD/$B/lib $B/bin/kjit compile moe_gemm_wgmma -p T=bfloat16 -p BLOCK_N=256 -p STAGES=4 -p GATED=0 -p GROUP_M=4 -p EPILOGUE=1 -p PROBE=$p --target sm_90a > /tmp/c_$p.txt 2>&1
  entry=$(grep -o '/[^ ]*\.kjit' /tmp/c_$p.txt | head -1)
  python3 -c "import sys; d=open(sys.argv[1],'rb').read(); i=d.find(b'\x7fELF'); open(sys.argv[2],'wb').write(d[i:])" $entry /tmp/p$p.cubin
  cuobjdump -sass /tmp/p$p.cubin > $OUT/down_probe$p.sass 2>&1
done
