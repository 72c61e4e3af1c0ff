#!/usr/bin/env bash
# s28 call E (an H200): linear() with gemm_wgmma as a programmatic dependent launch (the bundle's
# libkjit_c.so) and without (libkjit_c-nopdl.so), each against F.linear from CUDA graphs in its own
# process, at every m of the three weights, in turns.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/$B/python:$PWD/bench/python
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
for lib in libkjit_c.so libkjit_c-nopdl.so; do
  s=$(date +%s); label=${lib#libkjit_c}; label=${label%.so}; label=${label:-"-pdl"}
  KJIT_C_LIBRARY=$PWD/$B/lib/$lib timeout 100 python3 bench/python/gemm_torch.py --linear >$OUT/linear$label.txt 2>&1
  echo "== $lib: rc=$? $(( $(date +%s) - s )) s"; grep -E '^\| [0-9]|error|Error|miss' $OUT/linear$label.txt | cut -c1-120
done
