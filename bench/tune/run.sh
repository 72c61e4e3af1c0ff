#!/usr/bin/env bash
# The tuning checks and measurements of BENCHMARKS.md's "Tuned variants" section, on the GPU
# machine, in one call: from a directory holding gpu-bundle/ (tools/gpu-check with
# KJIT_GPU_CHECK_TARGETS="kjit_cli kjit_ops_gpu_tests kjit_gpu_bench"), this script, shapes.json
# and tune_torch.py. Writes its logs to $OUT (default ./out).
#   1. the tuning GPU tests and the wrappers' row-wise and activation tests (the plans changed);
#   2. a second process uses the recorded winner: `kjit tune` twice, the second from the table;
#   3. kjit tune of rms_norm, softmax and silu_and_mul in bf16 at every shape of shapes.json,
#      with the heuristic's time from the same measurement, then torch at the same shapes;
#   4. the wrapper's launch cost over a raw cuLaunchKernel (BM_LaunchCost, BM_OpsLaunchCost).
# `run.sh recheck` instead runs the tests of 1 again and the production path: tune, export,
# `kjit prebuild --tuned`, then a KJIT_MODE=prebuilt process on an empty user cache finds the
# record and the winner's code in the tier.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-out}
mkdir -p "$out"
bin=gpu-bundle/bin
bin/kjit --help >/dev/null 2>&1 || export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib/fallback
KJIT_CACHE_DIR=$(mktemp -d)
export KJIT_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/summary.txt"

timeout 120 "$bin/kjit_ops_gpu_tests" --gtest_filter='TuningGpu*:RowwiseGpu*:Activation*' \
  >"$out/tests.log" 2>&1
echo "tests: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests.log" | tr '\n' ' ')" |
  tee -a "$out/summary.txt"

if [[ ${1:-} == recheck ]]; then
  echo '{"types": ["bfloat16"], "rows": [4096], "lengths": [4096]}' >one.json
  tier=$(mktemp -d)/prebuilt
  {
    "$bin/kjit" tune rms_norm --shapes one.json --json
    "$bin/kjit" tune export table.json
    "$bin/kjit" prebuild --tuned table.json --out "$tier" --json
    echo "prebuild exit $?"
    KJIT_MODE=prebuilt KJIT_PREBUILT_DIR=$tier KJIT_CACHE_DIR=$(mktemp -d) \
      "$bin/kjit" tune rms_norm --shapes one.json --json
    echo "prebuilt-mode tune exit $?"
  } >"$out/prebuilt_flow.log" 2>&1
  grep -E '"tuned_now"|exit|"built"' "$out/prebuilt_flow.log"
  exit 0
fi
grep '^\[ TUNED' "$out/tests.log" | tee -a "$out/summary.txt"

echo '{"types": ["bfloat16"], "rows": [4096], "lengths": [2048]}' >second.json
{
  "$bin/kjit" tune softmax --shapes second.json --json
  echo "exit $?"
  "$bin/kjit" tune softmax --shapes second.json --json
  echo "exit $?"
  "$bin/kjit" tune ls --json
} >"$out/second_process.log" 2>&1
echo "second process: tuned_now $(grep -o '"tuned_now": [a-z]*' "$out/second_process.log" |
  tr '\n' ' ')" | tee -a "$out/summary.txt"

for op in rms_norm softmax silu_and_mul; do
  start=$(date +%s)
  timeout 110 "$bin/kjit" tune "$op" --shapes shapes.json --budget 20 --json \
    >"$out/tune_$op.json" 2>>"$out/summary.txt"
  echo "kjit tune $op: exit $? in $(($(date +%s) - start)) s" | tee -a "$out/summary.txt"
done
timeout 90 env PYTHONUNBUFFERED=1 python3 tune_torch.py shapes.json >"$out/torch.jsonl" 2>&1
echo "torch: exit $?" | tee -a "$out/summary.txt"
# Before (main at 441f09d, built without an RPATH) and after, in the same run.
for program in kjit_gpu_bench_before kjit_gpu_bench; do
  echo "== $program"
  LD_LIBRARY_PATH=$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 30 \
    "gpu-bundle/bench/$program" --benchmark_filter='LaunchCost' --benchmark_repetitions=3
  echo "exit $?"
done >"$out/launch_cost.log" 2>&1
grep -E '^==|^exit|LaunchCost' "$out/launch_cost.log" | tee -a "$out/summary.txt"
