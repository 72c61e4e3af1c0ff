#!/bin/bash
# s38 call A: can a 384-thread kernel's consumer warpgroups (setmaxnreg.inc 232) hold more than
# the launch's 168 registers a thread? SASS of regcap.cu at several counts of values kept live
# across a wgmma loop beside 128 accumulators.
cd "$(dirname "$0")"
nvcc --version | tail -2
for K in 24 40 60 80 100 110; do
  nvcc -DKEEP=$K -gencode arch=compute_90a,code=sm_90a -cubin -o k$K.cubin regcap.cu -Xptxas -v 2>&1 | grep -i "spill\|registers"
  cuobjdump -sass k$K.cubin > k$K.sass
  echo "KEEP=$K STL=$(grep -c 'STL' k$K.sass) LDL=$(grep -c 'LDL' k$K.sass) maxreg=$(grep -o 'R[0-9]\+' k$K.sass | tr -d R | sort -n | tail -1) HGMMA=$(grep -c HGMMA k$K.sass)"
done
cp k110.sass "$OUT/" 2>/dev/null
