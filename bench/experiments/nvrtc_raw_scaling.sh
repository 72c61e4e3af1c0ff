#!/usr/bin/env bash
# NVRTC's own scaling on this machine: the same 192 programs (16 kernels each, sm_90) compiled by
# 1 process in a row, then by P processes at once (each loading NVRTC), 2 rounds.
# Run from the repository root after building build/exp/nvrtc_processes (nvrtc_processes.c says how).
set -euo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
probe=build/exp/nvrtc_processes
$probe serial 16 12 >/dev/null # warm-up
for round in 1 2; do
  $probe serial 16 12
  $probe exec 16 12
done
