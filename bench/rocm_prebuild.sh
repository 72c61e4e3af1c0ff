#!/usr/bin/env bash
# kjit prebuild against one ROCm release (issue 13, "Measured"): wall time, CPU time, variants and
# bytes of the built-in LEVEL (or of set files) for TARGETS, the fastest of REPEAT runs, each into
# a fresh tier.
#
#   bench/rocm_prebuild.sh RELEASE LEVEL TARGETS [JOBS]
#     RELEASE  6.4 or 7.2 (run in that release's root, tools/rocm-root), or host (Debian 12's
#              ROCm 5.2, no root)
#     LEVEL    1, 2 or 3; or set:FILE to build a set file instead
#     TARGETS  "gfx942;gfx950"
#     JOBS     --jobs (default 2)
#   KJIT     the kjit binary (default build/release/tools/kjit)
#   REPEAT   runs, the fastest reported (default 2): the machine may be shared
#
# Prints one Markdown row: release, what, targets, jobs, variants, failed, bytes, the fastest run's
# wall and CPU seconds, and every run's wall seconds. Exits 2 with kjit's error when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
release=${1:?release}
level=${2:?level}
targets=${3:?targets}
jobs=${4:-2}
kjit=${KJIT:-build/release/tools/kjit}
repeat=${REPEAT:-2}
# Under the repository, which the roots bind-mount at its own path.
work=$(mktemp -d "$PWD/build/rocm-prebuild.XXXXXX")
trap 'rm -rf "$work"' EXIT

selection=(--level "$level")
[[ $level == set:* ]] && selection=(--sets "${level#set:}")
run() {
  if [[ $release == host ]]; then
    "$@"
  else
    tools/rocm-root --run "$release" "$@"
  fi
}

walls=()
best_wall='' best_cpu='' summary=''
for ((i = 1; i <= repeat; i++)); do
  rm -rf "$work/tier"
  # bash's time: wall, then user + system of kjit and its worker processes.
  if ! run bash -c 'TIMEFORMAT="%R %U %S"; { time "$@" >"'"$work"'/out.json" 2>"'"$work"'/log"; } 2>"'"$work"'/time"' \
    timed "$kjit" prebuild --targets "$targets" "${selection[@]}" --jobs "$jobs" \
    --out "$work/tier" --json; then
    echo "rocm_prebuild: $release $level $targets failed:" >&2
    grep -v '^prebuild: ' "$work/log" >&2 || true
    exit 2
  fi
  read -r wall user system <"$work/time"
  walls+=("$wall")
  if [[ -z $best_wall ]] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then
    best_wall=$wall
    best_cpu=$(awk -v u="$user" -v s="$system" 'BEGIN { printf "%.1f", u + s }')
    summary=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d["variants"], len(d["failed"]), d["bytes"], sep="|")' "$work/out.json")
  fi
done
IFS='|' read -r variants failed bytes <<<"$summary"
echo "| $release | $level | $targets | $jobs | $variants | $failed | $bytes | $best_wall | $best_cpu | ${walls[*]} |"
