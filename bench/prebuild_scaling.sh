#!/usr/bin/env bash
# kjit prebuild's speed: variants per second for each --jobs, against the same variants compiled
# each alone, one after another, in the same run (--jobs 1 --max-batch 1: the raw baseline).
#
#   bench/prebuild_scaling.sh [TARGET] [JOBS...]
#     TARGET   default gfx90a; JOBS default "1 2" (e.g. 1 2 4 8 16 on a 16-core machine)
#   KJIT       the kjit binary (default build/release/tools/kjit, else build/gpu-bundle/bin/kjit)
#   SET        core (default: the built-in level 1) or large (a generated set of 3,084 variants:
#              scale in 3 types x 1,024 sizes and axpy, so that 16 jobs have ~200 programs to share)
#   BASELINE   1 (default) times the alone baseline; 0 skips it (it is long for SET=large)
#   REPEAT     runs per --jobs, the fastest reported (default 3)
#
# Prints a Markdown table on stdout. Each run writes a fresh tier under a temporary directory.
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
if [[ ${SET:-core} == large ]]; then
  sizes=$(seq -s, 1 1024)
  cat >"$work/large.json" <<JSON
{"name": "large", "level": 1, "variants": [
  {"template": "scale", "params": {"T": ["float", "half", "bfloat16"], "N": [$sizes]}},
  {"template": "axpy", "params": {"T": ["float", "half", "bfloat16"], "ITEMS": [1, 2, 4, 8]}}]}
JSON
  selection=(--sets "$work/large.json")
fi

# Seconds of the fastest of REPEAT runs of `kjit prebuild "$@"`, each into a fresh tier; sets
# `variants` from the summary.
fastest() {
  local best="" run summary seconds
  for ((run = 0; run < ${REPEAT:-3}; run++)); do
    rm -rf "$work/tier"
    summary=$("$kjit" prebuild --targets "$target" "${selection[@]}" --out "$work/tier" --json "$@" \
      2>/dev/null) || { echo "prebuild_scaling: kjit prebuild $* failed" >&2; exit 1; }
    seconds=$(sed -n 's/.*"seconds": \([0-9.e+-]*\).*/\1/p' <<<"$summary")
    variants=$(sed -n 's/.*"variants": \([0-9]*\).*/\1/p' <<<"$summary")
    best=$(awk -v a="$seconds" -v b="$best" 'BEGIN { print (b == "" || a < b) ? a : b }')
  done
  result=$best
}

rows=()
alone=""
if [[ ${BASELINE:-1} == 1 ]]; then
  fastest --jobs 1 --max-batch 1
  alone=$result
  rows+=("$(awk -v s="$alone" -v n="$variants" \
    'BEGIN { printf "| each alone, in sequence | %.2f | %.1f | 1.00x | |", s, n / s }')")
fi
one=""
for jobs in "${jobs_list[@]}"; do
  fastest --jobs "$jobs"
  seconds=$result
  [[ -n $one ]] || one=$seconds
  rows+=("$(awk -v s="$seconds" -v n="$variants" -v a="$alone" -v o="$one" -v j="$jobs" 'BEGIN {
    printf "| --jobs %d | %.2f | %.1f | %s | %.2fx |", j, s, n / s,
      (a == "" ? "" : sprintf("%.2fx", a / s)), o / s }')")
done

echo "kjit prebuild, $variants variants (SET=${SET:-core}) for $target on $(nproc) cores," \
  "$(uname -n); fastest of ${REPEAT:-3} runs"
echo
echo "| run | seconds | variants/s | vs each alone | vs --jobs ${jobs_list[0]} |"
echo "| --- | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
