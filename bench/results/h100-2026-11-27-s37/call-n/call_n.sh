#!/usr/bin/env bash
# s37 call N (no GPU work): the SASS of the down and gate-up grouped GEMMs with PROBE 0 (the
# heuristic's form), 1 (no epilogue) and 5 (values computed, nothing written), compiled by the
# bundle's kjit for sm_90a and disassembled with the image's cuobjdump.
set -o pipefail
export KJIT_CACHE_DIR=$OUT/cache
B=build/gpu-bundle
which cuobjdump nvdisasm
for g in 0 1; do
  for p in 0 1 5; do
    bn=$([ $g = 1 ] && echo 128 || echo 256)
    LD_LIBRARY_PATH=$PWD/$B/lib $B/bin/kjit compile moe_gemm_wgmma -p T=bfloat16 -p BLOCK_N=$bn -p STAGES=4 -p GATED=$g -p GROUP_M=4 -p EPILOGUE=1 -p PROBE=$p --target sm_90a > $OUT/compile_${g}_$p.txt 2>&1
    entry=$(grep -o '/[^ ]*\.kjit' $OUT/compile_${g}_$p.txt | head -1)
    python3 -c "import sys; d=open(sys.argv[1],'rb').read(); i=d.find(b'\x7fELF'); open(sys.argv[2],'wb').write(d[i:])" $entry $OUT/gated${g}_probe$p.cubin
    cuobjdump -sass $OUT/gated${g}_probe$p.cubin > $OUT/gated${g}_probe$p.sass 2>&1
    echo "GATED $g PROBE $p: $(grep -c '^ */\*[0-9a-f]*\*/' $OUT/gated${g}_probe$p.sass) instructions, $(grep -c HGMMA $OUT/gated${g}_probe$p.sass) HGMMA, $(grep -c 'STL\|LDL' $OUT/gated${g}_probe$p.sass) local"
  done
done
rm -rf $OUT/cache
