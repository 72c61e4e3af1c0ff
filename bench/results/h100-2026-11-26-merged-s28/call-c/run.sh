#!/usr/bin/env bash
# Merged check s28, call C: the Python package's GPU tests, then the round's figures beside their
# baselines in the same process: linear() against F.linear (CUDA graphs) at 64 and 128 rows of
# 4096 x 4096, flash_attention() at 1k against cuDNN (two rounds), the paged decode against the
# copy and cuDNN, each grouped GEMM of fused_moe at 4096 tokens against dense.
B=build/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
grep commit $B/MANIFEST
echo "== python tests"; start=$(date +%s)
KJIT_GPU_CHECK_TIMEOUT=130 timeout 140 tools/gpu-check --run-python $OUT/py >$OUT/py.log 2>&1; echo "rc=$? in $(( $(date +%s) - start )) s"
grep -hE '(passed|failed|error)' $OUT/py/*.log | tail -4
grep -hE '^(FAILED|ERROR) ' $OUT/py/*.log | head -20
export PYTHONPATH=$PWD/$B/python:$PWD/bench/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
echo "== linear"; s=$(date +%s)
timeout 60 python3 bench/python/gemm_torch.py --linear 64,128 4096x4096 >$OUT/linear.txt 2>&1
echo "rc=$? $(( $(date +%s) - s )) s"; grep -E '^\| [0-9]|error|Error' $OUT/linear.txt | cut -c1-160
for round in 1 2; do
  echo "== attention 1k round $round"; s=$(date +%s)
  KJIT_ATTENTION_SEQLEN=1024 timeout 50 $B/bench/kjit_attention_gpu_bench >>$OUT/attention.txt 2>&1
  timeout 40 python3 bench/python/attention_torch.py 1024 cudnn >>$OUT/attention.txt 2>&1
  echo "$(( $(date +%s) - s )) s"
done
grep -iE 'tflop|1024' $OUT/attention.txt | head -30
echo "== decode"; s=$(date +%s)
KJIT_BENCH_QUICK=1 timeout 70 python3 bench/python/paged_attention_torch.py >$OUT/decode.txt 2>&1; echo "rc=$? $(( $(date +%s) - s )) s"
grep -vE '^\s*$' $OUT/decode.txt | head -30
echo "== moe"; s=$(date +%s)
timeout 60 $B/bench/kjit_moe_gpu_bench --prefill >$OUT/moe_prefill.txt 2>&1; echo "rc=$? $(( $(date +%s) - s )) s"; tail -20 $OUT/moe_prefill.txt
