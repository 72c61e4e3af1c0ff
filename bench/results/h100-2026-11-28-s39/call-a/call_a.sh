#!/bin/bash
# s39 call A: the audit's new Python GPU tests (torch references, moe_align, validate, misaligned FP8)
set -u
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
start=$(date +%s)
KJIT_GPU_CHECK_TIMEOUT=560 KJIT_GPU_CHECK_PYTHON_TESTS="test_gpu_moe_torch.py test_gpu_attention_moe.py" \
  tools/gpu-check --run-python "$OUT/py" ; echo "rc=$? in $(( $(date +%s) - start )) s"
tail -n 60 "$OUT/py/python_gpu_tests.log"
