#!/usr/bin/env bash
# Two kjit binaries, before and after a change, timed interleaved in one run (before, after,
# before, after...), so that a load that comes and goes on the machine falls on both alike:
# `kjit cache ls`, `ls --json` and `stats` on a user tier of COUNT entries (kjit_make_cache, as
# bench/cache_commands.sh builds it), and `kjit prebuild` of the built-in level 1 for one target
# into a fresh tier each time.
#
#   bench/cli_before_after.sh BEFORE_KJIT AFTER_KJIT [COUNT]
#   ROUNDS   rounds of the cache commands (default 5) and of prebuild (default 3: PREBUILD_ROUNDS)
#   TARGET   prebuild's target (default sm_90: NVRTC, the faster compiler); JOBS its --jobs (2)
#
# Prints, for each command and binary, the median wall and CPU time (user + system, workers
# included) of its runs, and the ratio after / before of the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1
after=$2
count=${3:-100000}
rounds=${ROUNDS:-5}
prebuild_rounds=${PREBUILD_ROUNDS:-3}
target=${TARGET:-sm_90}
jobs=${JOBS:-2}
scratch=$(mktemp -d "$PWD/build/cli-before-after.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export KJIT_PREBUILT_DIR=$scratch/none
export KJIT_CACHE_DIR=$scratch/cache

# Appends "WALL CPU" of one run of the command given (output discarded) to the file $1.
time_into() {
  local file=$1 TIMEFORMAT='%R %U %S' times
  shift
  times=$({ time "$@" >/dev/null 2>&1; } 2>&1)
  awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' <<<"$times" >>"$file"
}

# The median of column $2 of file $1.
median() { cut -d' ' -f"$2" "$1" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

report() {
  local name=$1 b=$scratch/$1.before a=$scratch/$1.after
  local bw bc aw ac
  bw=$(median "$b" 1) bc=$(median "$b" 2) aw=$(median "$a" 1) ac=$(median "$a" 2)
  printf '| %s | %s s, %s s | %s s, %s s | %.2f, %.2f |\n' "$name" "$bw" "$bc" "$aw" "$ac" \
    "$(awk -v a="$aw" -v b="$bw" 'BEGIN { print a / b }')" \
    "$(awk -v a="$ac" -v b="$bc" 'BEGIN { print a / b }')"
}

echo "machine: $(nproc) cores, $(uname -r); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
build/release/bench/kjit_make_cache "$KJIT_CACHE_DIR" "$count" >/dev/null
"$after" cache ls >/dev/null # the first ls after the tier is written writes the summaries
echo "cache: $count entries"

for _ in $(seq "$rounds"); do
  for side in before after; do
    kjit=${!side}
    time_into "$scratch/ls.$side" "$kjit" cache ls
    time_into "$scratch/ls-json.$side" "$kjit" cache ls --json
    time_into "$scratch/stats.$side" "$kjit" cache stats
  done
done

prebuild() {
  rm -rf "$scratch/tier"
  "$1" prebuild --targets "$target" --level 1 --jobs "$jobs" --out "$scratch/tier"
}
for _ in $(seq "$prebuild_rounds"); do
  for side in before after; do
    time_into "$scratch/prebuild.$side" prebuild "${!side}"
  done
done
variants=$("$after" prebuild --targets "$target" --level 1 --out "$scratch/tier" --json |
  sed -n 's/.*"variants": \([0-9]*\).*/\1/p')

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| command | before: wall, CPU | after: wall, CPU | after / before: wall, CPU |"
echo "| --- | --- | --- | --- |"
report ls
report ls-json
report stats
report prebuild
echo
echo "ls, ls --json, stats: median of $rounds runs each; prebuild: $variants variants of level 1" \
  "for $target with --jobs $jobs, median of $prebuild_rounds runs each"
