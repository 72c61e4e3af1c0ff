#!/usr/bin/env bash
# Times the `kjit cache` commands on a user tier of COUNT entries (default 100,000) built by
# kjit_make_cache, each command run 3 times (prune once, at the end, since it changes the cache);
# prints the median wall time of each. The baseline in the same run is `find` listing the same
# tree with sizes, the least any listing must do.
#
#   tools/build && bench/cache_commands.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
count=${1:-100000}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export KJIT_CACHE_DIR=$scratch/cache KJIT_PREBUILT_DIR=$scratch/none
"$build/bench/kjit_make_cache" "$KJIT_CACHE_DIR" "$count"
sync

# Nanoseconds as seconds with three decimals.
seconds() { printf '%d.%03d' $(($1 / 1000000000)) $(($1 / 1000000 % 1000)); }

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

kjit=$build/tools/kjit
bytes=$(du -sb "$KJIT_CACHE_DIR/v1" | cut -f1)
echo "cache: $count entries, $bytes bytes, on $(nproc) cores"
printf '%-44s %8s s\n' "find -printf (baseline: the tree with sizes)" \
  "$(median_seconds find "$KJIT_CACHE_DIR/v1" -name '*.kjit' -printf '%s %p\n')"
printf '%-44s %8s s\n' "kjit cache ls" "$(median_seconds "$kjit" cache ls)"
printf '%-44s %8s s\n' "kjit cache ls --json" "$(median_seconds "$kjit" cache ls --json)"
printf '%-44s %8s s\n' "kjit cache stats" "$(median_seconds "$kjit" cache stats)"
printf '%-44s %8s s\n' "kjit cache verify" "$(median_seconds "$kjit" cache verify)"
start=$(date +%s%N)
"$kjit" cache prune --max-size "$((bytes / 2))" --json >"$scratch/pruned.json"
printf '%-44s %8s s   %s\n' "kjit cache prune --max-size <half>" \
  "$(seconds $(($(date +%s%N) - start)))" "$(tr -d ' \n' <"$scratch/pruned.json")"
# The baseline for prune, in the same run: unlinking the remaining entries with rm, which does
# nothing but the unlinks.
remaining=$(find "$KJIT_CACHE_DIR/v1" -name '*.kjit' | wc -l)
start=$(date +%s%N)
rm -rf "$KJIT_CACHE_DIR/v1"
printf '%-44s %8s s\n' "rm -rf of the $remaining remaining (baseline)" \
  "$(seconds $(($(date +%s%N) - start)))"
