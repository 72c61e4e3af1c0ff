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
source tools/lib/cache_totals.bash
build=build/release
count=${1:-100000}
baseline=${BASELINE:-}
# Scratch space on the real disk, beside the repository: /tmp may be a tmpfs elsewhere.
scratch=$(mktemp -d "$PWD/build/cache-commands.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export KJIT_PREBUILT_DIR=$scratch/none

# "WALL CPU" in seconds of one run of the command given, its output discarded; CPU is user plus
# system time of all its threads, which other engineers' builds on the machine disturb less.
once() {
  local TIMEFORMAT='%R %U %S' times
  times=$({ time "$@" >/dev/null 2>&1; } 2>&1)
  awk '{ printf "%.3f s %7.3f s", $1, $2 + $3 }' <<<"$times"
}

# The run of median wall time out of 3.
median() {
  local runs=()
  for _ in 1 2 3; do
    runs+=("$(once "$@")")
  done
  printf '%s\n' "${runs[@]}" | sort -n | sed -n 2p
}

row() { printf '%-52s %20s%s\n' "$1" "$2" "${3:+   $3}"; }

# Times `prune --max-size <half>` of the binary given on a copy of the fixture (times kept), then
# `rm -rf` of what it left, and prints both.
time_prune() {
  local kjit=$1 label=$2
  export KJIT_CACHE_DIR=$scratch/prune-$label
  cp -a "$fixture" "$KJIT_CACHE_DIR"
  sync
  local timing remaining
  prune_half() { "$kjit" cache prune --max-size "$((bytes / 2))" --json >"$scratch/pruned.json"; }
  timing=$(once prune_half)
  row "$label: kjit cache prune --max-size <half>" "$timing" \
    "$(tr -d ' \n' <"$scratch/pruned.json")"
  local totals
  totals=$(user_tier_totals "$kjit")
  remaining=${totals% *}
  row "rm -rf of the $remaining it left (baseline)" "$(once rm -rf "$KJIT_CACHE_DIR")"
}

kjit=$build/tools/kjit
echo "machine: $(nproc) cores, $(uname -r), $(findmnt -no FSTYPE,OPTIONS -T "$scratch")"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
fixture=$scratch/cache
export KJIT_CACHE_DIR=$fixture
"$build/bench/kjit_make_cache" "$KJIT_CACHE_DIR" "$count"
sync
totals=$(user_tier_totals "$kjit")
bytes=${totals#* }
echo "cache: $count entries, $bytes bytes"
printf '%-52s %20s\n' "command" "wall        cpu"
row "find -printf (baseline: the tree with sizes)" \
  "$(median find "$KJIT_CACHE_DIR" -name '*.kjit' -printf '%s %p\n')"
row "kjit cache ls, first (reads every header)" "$(once "$kjit" cache ls)"
row "kjit cache ls" "$(median "$kjit" cache ls)"
row "kjit cache ls --json" "$(median "$kjit" cache ls --json)"
row "kjit cache stats" "$(median "$kjit" cache stats)"
row "kjit cache verify" "$(median "$kjit" cache verify)"
if [ -n "$baseline" ]; then
  row "baseline: $baseline cache ls" "$(median "$baseline" cache ls)"
  row "baseline: $baseline cache stats" "$(median "$baseline" cache stats)"
fi
time_prune "$kjit" "kjit"
if [ -n "$baseline" ]; then
  time_prune "$baseline" "baseline"
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
