#!/usr/bin/env bash
# Times the `kjit cache` commands on a user tier of COUNT entries (default 100,000) built by
# kjit_make_cache. The first `ls` after the tier is written reads every header and writes the
# summaries files (cold); later ones read the summaries (warm). Every other command is run 3 times
# and the median wall time printed; prune once, at the end, since it changes the cache.
#
# Baselines in the same run: `find` listing the same tree with sizes (the least any listing must
# do), `rm -rf` of what prune left (nothing but unlinks, on one thread), and, when BASELINE names
# another kjit binary (an older build), that binary's ls, stats and prune on the same fixture.
#
#   tools/build && bench/cache_commands.sh [COUNT]
#   BASELINE=/path/to/old/kjit bench/cache_commands.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
count=${1:-100000}
baseline=${BASELINE:-}
# Scratch space on the real disk, beside the repository: /tmp may be a tmpfs elsewhere.
scratch=$(mktemp -d "$PWD/build/cache-commands.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export KJIT_PREBUILT_DIR=$scratch/none

# Nanoseconds as seconds with three decimals.
seconds() { printf '%d.%03d' $(($1 / 1000000000)) $(($1 / 1000000 % 1000)); }

# The wall time, in seconds, of one run of the command given.
once_seconds() {
  local start
  start=$(date +%s%N)
  "$@" >/dev/null
  seconds $(($(date +%s%N) - start))
}

# The median of 3 wall times, in seconds, of the command given.
median_seconds() {
  local times=()
  for _ in 1 2 3; do
    local start
    start=$(date +%s%N)
    "$@" >/dev/null
    times+=($(($(date +%s%N) - start)))
  done
  seconds "$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)"
}

row() { printf '%-56s %8s s%s\n' "$1" "$2" "${3:+   $3}"; }

# Times `prune --max-size <half>` of the binary given on a copy of the fixture (times kept), then
# `rm -rf` of what it left, and prints both.
time_prune() {
  local kjit=$1 label=$2
  export KJIT_CACHE_DIR=$scratch/prune-$label
  cp -a "$fixture" "$KJIT_CACHE_DIR"
  sync
  local start elapsed remaining
  start=$(date +%s%N)
  "$kjit" cache prune --max-size "$((bytes / 2))" --json >"$scratch/pruned.json"
  elapsed=$(($(date +%s%N) - start))
  row "$label: kjit cache prune --max-size <half>" "$(seconds $elapsed)" \
    "$(tr -d ' \n' <"$scratch/pruned.json")"
  remaining=$(find "$KJIT_CACHE_DIR/v1" -name '*.kjit' | wc -l)
  start=$(date +%s%N)
  rm -rf "$KJIT_CACHE_DIR"
  row "rm -rf of the $remaining it left (baseline)" "$(seconds $(($(date +%s%N) - start)))"
}

kjit=$build/tools/kjit
echo "machine: $(nproc) cores, $(uname -r), $(findmnt -no FSTYPE,OPTIONS -T "$scratch")"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
fixture=$scratch/cache
export KJIT_CACHE_DIR=$fixture
"$build/bench/kjit_make_cache" "$KJIT_CACHE_DIR" "$count"
sync
bytes=$(du -sb "$KJIT_CACHE_DIR/v1" | cut -f1)
echo "cache: $count entries, $bytes bytes"
row "find -printf (baseline: the tree with sizes)" \
  "$(median_seconds find "$KJIT_CACHE_DIR/v1" -name '*.kjit' -printf '%s %p\n')"
row "kjit cache ls, first (reads every header)" "$(once_seconds "$kjit" cache ls)"
row "kjit cache ls" "$(median_seconds "$kjit" cache ls)"
row "kjit cache ls --json" "$(median_seconds "$kjit" cache ls --json)"
row "kjit cache stats" "$(median_seconds "$kjit" cache stats)"
row "kjit cache verify" "$(median_seconds "$kjit" cache verify)"
if [ -n "$baseline" ]; then
  row "baseline: $baseline cache ls" "$(median_seconds "$baseline" cache ls)"
  row "baseline: $baseline cache stats" "$(median_seconds "$baseline" cache stats)"
fi
time_prune "$kjit" "kjit"
if [ -n "$baseline" ]; then
  time_prune "$baseline" "baseline"
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
