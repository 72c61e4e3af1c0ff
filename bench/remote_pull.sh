#!/usr/bin/env bash
# `kjit cache pull` of COUNT entries (issue 15, "Measured"), against baselines in the same run: the
# same values read by raw GETs through redis-cli, one round trip each as pull does (and through
# --pipe), and a copy of the same entry files (what writing them costs). A user tier of COUNT
# entries is made by kjit_make_cache (real headers and code objects, see bench/make_cache.cpp) and
# pushed to a redis-server this script starts on a free loopback port (and stops); each round
# pulls every entry into an empty user tier. Minimum and median of ROUNDS wall times.
#
#   [TMPDIR=/dev/shm] bench/remote_pull.sh [BUILD] [COUNT] [ROUNDS]   (default build/release 10000 3)
# (the work directory, the tiers and the server's files, go under TMPDIR, default /tmp)
set -euo pipefail
build=$(realpath "${1:-build/release}")
count=${2:-10000}
rounds=${3:-3}
kjit=$build/tools/kjit
work=$(mktemp -d "${TMPDIR:-/tmp}/kjit-pull-bench-XXXXXX")
source "$(dirname "$0")/lib/redis.bash"
source "$(dirname "$0")/lib/layout.bash"
start_redis "$work"
export KJIT_REMOTE_STORAGE="redis://127.0.0.1:$port" KJIT_PREBUILT_DIR="$work/none"

"$build/bench/kjit_make_cache" "$work/source" "$count" >&2
stored=$(KJIT_CACHE_DIR="$work/source" "$kjit" cache push --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["remotes"][0]["stored"])')
[ "$stored" = "$count" ] || { echo "pushed $stored entries, expected $count" >&2; exit 1; }
bytes=$(du -sb --apparent-size "$(kjit_layout "$kjit" "$work/source" version_directory)" | cut -f1)
redis-cli -p "$port" --scan --pattern 'kjit/entry/*' | sed 's/^/GET /' >"$work/gets"

ms_since() { echo "($(date +%s%N) - $1) / 1000000" | bc -l; }
summary() { sort -g | awk '{ v[NR] = $1 } END { printf "%.1f %.1f\n", v[1], v[int((NR + 1) / 2)] }'; }
: >"$work/pull" >"$work/get" >"$work/pipe" >"$work/copy"
for round in $(seq "$rounds"); do
  rm -rf "$work/pulled"
  start=$(date +%s%N)
  pulled=$(KJIT_CACHE_DIR="$work/pulled" "$kjit" cache pull --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["pulled"])')
  ms_since "$start" >>"$work/pull"
  [ "$pulled" = "$count" ] || { echo "round $round: pulled $pulled, expected $count" >&2; exit 1; }

  start=$(date +%s%N)
  redis-cli -p "$port" <"$work/gets" >/dev/null
  ms_since "$start" >>"$work/get"

  start=$(date +%s%N)
  redis-cli -p "$port" --pipe <"$work/gets" >/dev/null
  ms_since "$start" >>"$work/pipe"

  rm -rf "$work/copied"
  start=$(date +%s%N)
  cp -r "$work/source" "$work/copied"
  ms_since "$start" >>"$work/copy"
done
pull_min=$(sort -g "$work/pull" | head -1)
echo "$count entries, $bytes bytes in the user tier; wall ms over $rounds rounds:"
echo "                                            min    median   min / pull's min"
for what in pull get pipe copy; do
  case $what in
    pull) label="kjit cache pull (SCAN, GET, verify, write)" ;;
    get) label="redis-cli GET each, one round trip each" ;;
    pipe) label="redis-cli --pipe GET each (pipelined)" ;;
    copy) label="cp -r of the entry files" ;;
  esac
  read -r min median < <(summary <"$work/$what")
  printf '  %-44s %9.1f %9.1f   %6.3f\n' "$label" "$min" "$median" "$(echo "$min / $pull_min" | bc -l)"
done
