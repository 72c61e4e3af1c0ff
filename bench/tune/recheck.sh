#!/usr/bin/env bash
# After the H100 run of run.sh: the tuning GPU tests again (with the record comparison fixed),
# and the production path: tune, export, `kjit prebuild --tuned`, then a KJIT_MODE=prebuilt
# process on an empty user cache finds the record and the winner's code in the tier.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-out}
mkdir -p "$out"
bin=gpu-bundle/bin
bin/kjit --help >/dev/null 2>&1 || export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib/fallback
KJIT_CACHE_DIR=$(mktemp -d)
export KJIT_CACHE_DIR
timeout 150 "$bin/kjit_ops_gpu_tests" --gtest_filter='TuningGpu*:RowwiseGpu*:Activation*' \
  >"$out/tests.log" 2>&1
echo "tests: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests.log" | tr '\n' ' ')"
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
