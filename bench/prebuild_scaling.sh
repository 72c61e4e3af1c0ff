#!/usr/bin/env bash
# kjit prebuild's speed: variants per second for each --jobs, against the same variants compiled
# each alone, one after another, in the same run (--jobs 1 --max-batch 1: the raw baseline).
#
#   bench/prebuild_scaling.sh [TARGET] [JOBS...]
#     TARGET   default gfx90a; JOBS default "1 2" (e.g. 1 2 4 8 16 on a 16-core machine)
#   KJIT       the kjit binary (default build/release/tools/kjit, else build/gpu-bundle/bin/kjit)
#   SET        core (default: the built-in level 1), ops (the built-in levels 1 and 2 together: the
#              real operators, ~50 programs for one target) or large (bench/sets/large.json: 3,084
#              variants: scale in 3 types x 1,024 sizes and axpy, so that 16 jobs have ~200
#              programs to share)
#   BASELINE   1 (default) times the alone baseline; 0 skips it (it is long for SET=large)
#   REPEAT     runs per --jobs, the fastest reported (default 3)
#   WARMUP     1 (default): one untimed run first, so that the first timed run does not pay for
#              a cold page cache (the compiler's libraries, the kjit binary); 0 skips it
#
# Prints a Markdown table on stdout. Each run writes a fresh tier under a temporary directory.
# "CPU s" is the run's user + system time with its workers: when it grows with --jobs, each
# compile got slower (shared cores, SMT, clock), not kjit's serial part.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-gfx90a}
shift || true
jobs_list=("$@")
((${#jobs_list[@]})) || jobs_list=(1 2)
kjit=${KJIT:-}
if [[ -z $kjit ]]; then
  for candidate in build/release/tools/kjit build/gpu-bundle/bin/kjit; do
    [[ -x $candidate ]] && kjit=$candidate && break
  done
fi
[[ -x $kjit ]] || { echo "prebuild_scaling: no kjit binary (set KJIT)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

selection=(--level 1)
if [[ ${SET:-core} == ops ]]; then
  selection=(--sets templates/sets/core.json --sets templates/sets/inference.json)
elif [[ ${SET:-core} == large ]]; then
  selection=(--sets bench/sets/large.json)
fi

# One `kjit prebuild "$@"` into a fresh tier: sets `seconds`, `cpu` (user + system, workers
# included) and `variants` from its summary.
run_once() {
  local summary times
  rm -rf "$work/tier"
  TIMEFORMAT='%U %S'
  { time "$kjit" prebuild --targets "$target" "${selection[@]}" --out "$work/tier" --json "$@" \
    >"$work/summary" 2>/dev/null; } 2>"$work/times" ||
    { echo "prebuild_scaling: kjit prebuild $* failed" >&2; exit 1; }
  summary=$(<"$work/summary")
  times=$(<"$work/times")
  seconds=$(sed -n 's/.*"seconds": \([0-9.e+-]*\).*/\1/p' <<<"$summary")
  variants=$(sed -n 's/.*"variants": \([0-9]*\).*/\1/p' <<<"$summary")
  cpu=$(awk '{ print $1 + $2 }' <<<"$times")
}

# The fastest of REPEAT runs: sets `result` (seconds) and `result_cpu` (that run's CPU seconds).
fastest() {
  local best="" best_cpu="" run
  for ((run = 0; run < ${REPEAT:-3}; run++)); do
    run_once "$@"
    if [[ -z $best ]] || awk -v a="$seconds" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$seconds
      best_cpu=$cpu
    fi
  done
  result=$best
  result_cpu=$best_cpu
}

[[ ${WARMUP:-1} == 0 ]] || run_once --jobs "${jobs_list[-1]}"

rows=()
alone=""
if [[ ${BASELINE:-1} == 1 ]]; then
  fastest --jobs 1 --max-batch 1
  alone=$result
  rows+=("$(awk -v s="$alone" -v c="$result_cpu" -v n="$variants" \
    'BEGIN { printf "| each alone, in sequence | %.2f | %.1f | %.1f | 1.00x | |", s, c, n / s }')")
fi
one=""
for jobs in "${jobs_list[@]}"; do
  fastest --jobs "$jobs"
  seconds=$result
  [[ -n $one ]] || one=$seconds
  rows+=("$(awk -v s="$seconds" -v c="$result_cpu" -v n="$variants" -v a="$alone" -v o="$one" \
    -v j="$jobs" 'BEGIN {
    printf "| --jobs %d | %.2f | %.1f | %.1f | %s | %.2fx |", j, s, c, n / s,
      (a == "" ? "" : sprintf("%.2fx", a / s)), o / s }')")
done

threads=$(lscpu 2>/dev/null | sed -n 's/^Thread(s) per core: *//p')
echo "kjit prebuild, $variants variants (SET=${SET:-core}) for $target on $(nproc) cores" \
  "(${threads:-?} threads per core), $(uname -n); fastest of ${REPEAT:-3} runs" \
  "after ${WARMUP:-1} warm-up; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | seconds | CPU s | variants/s | vs each alone | vs --jobs ${jobs_list[0]} |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
