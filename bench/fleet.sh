#!/usr/bin/env bash
# The remote tier in fresh `kjit compile` processes, against a redis-server this script starts on a
# free loopback port (and stops): the time from parameters to code object in hand (compile --json's
# elapsed_ms) for a compile, a disk hit and a remote hit, medians of ROUNDS; then a storm of NODES
# processes, each with its own empty user tier, asking for one missing variant at once, with and
# without the remote, against one node alone. Compiles are counted from each node's --json origin.
#
#   bench/fleet.sh [KJIT] [ROUNDS] [NODES]    (default build/release/tools/kjit 10 8)
set -euo pipefail
kjit=$(realpath "${1:-build/release/tools/kjit}")
rounds=${2:-10}
nodes=${3:-8}
work=$(mktemp -d /tmp/kjit-fleet-bench-XXXXXX)
source "$(dirname "$0")/lib/redis.bash"
source "$(dirname "$0")/lib/layout.bash"
start_redis "$work"
remote="redis://127.0.0.1:$port"
export KJIT_PREBUILT_DIR="$work/none"

field() { python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# compile N CACHE [REMOTE]: prints "origin elapsed_ms"
compile() {
  KJIT_CACHE_DIR="$2" KJIT_REMOTE_STORAGE="${3:-}" "$kjit" compile scale -p T=half -p "N=$1" \
    --target gfx90a --json | python3 -c "import json, sys; r = json.load(sys.stdin); print(r['origin'].replace(' ', '_'), r['elapsed_ms'])"
}

: >"$work/compile" >"$work/disk" >"$work/remote_cold" >"$work/remote_memo"
for i in $(seq "$rounds"); do
  n=$((1000 + i))
  read -r origin ms < <(compile $n "$work/c$i" "$remote")
  [ "$origin" = compiled ] || { echo "round $i: expected a compile, got $origin" >&2; exit 1; }
  echo "$ms" >>"$work/compile"
  read -r origin ms < <(compile $n "$work/c$i")
  [ "$origin" = user_cache ] || { echo "round $i: expected a disk hit, got $origin" >&2; exit 1; }
  echo "$ms" >>"$work/disk"
  # A new node: an empty user tier, so it loads the compiler for its identity first.
  read -r origin ms < <(compile $n "$work/r$i" "$remote")
  [ "$origin" = remote ] || { echo "round $i: expected a remote hit, got $origin" >&2; exit 1; }
  echo "$ms" >>"$work/remote_cold"
  # A node that knows the compiler (its memo) but not the variant.
  memo=$(kjit_layout "$kjit" "$work/m$i" compilers_directory)
  mkdir -p "$(dirname "$memo")" && cp -r "$(kjit_layout "$kjit" "$work/c$i" compilers_directory)" "$memo"
  read -r origin ms < <(compile $n "$work/m$i" "$remote")
  [ "$origin" = remote ] || { echo "round $i: expected a remote hit, got $origin" >&2; exit 1; }
  echo "$ms" >>"$work/remote_memo"
done
c=$(median <"$work/compile"); d=$(median <"$work/disk")
rc=$(median <"$work/remote_cold"); rm_=$(median <"$work/remote_memo")
echo "fresh process, parameters to code object (elapsed_ms), median of $rounds:"
printf '  disk hit (baseline)                       %9.3f ms\n' "$d"
printf '  remote hit, node with the compiler memo   %9.3f ms  %6.1fx disk\n' "$rm_" "$(echo "$rm_ / $d" | bc -l)"
printf '  remote hit, new node (loads the compiler) %9.3f ms  %6.1fx disk\n' "$rc" "$(echo "$rc / $d" | bc -l)"
printf '  compile                                   %9.3f ms  %6.1fx disk, %5.1fx the remote hit with memo\n' \
  "$c" "$(echo "$c / $d" | bc -l)" "$(echo "$c / $rm_" | bc -l)"

# storm LABEL N REMOTE: NODES processes at once; prints wall ms and compiles
storm() {
  local label=$1 n=$2 use_remote=$3 count=$4 start end compiles=0 pids=()
  start=$(date +%s%N)
  for k in $(seq "$count"); do
    KJIT_CACHE_DIR="$work/$label-$k" KJIT_REMOTE_STORAGE="$use_remote" "$kjit" compile scale \
      -p T=half -p "N=$n" --target gfx90a --json >"$work/$label-$k.json" &
    pids+=($!)
  done
  wait "${pids[@]}"
  end=$(date +%s%N)
  for k in $(seq "$count"); do
    [ "$(field origin <"$work/$label-$k.json")" = compiled ] && compiles=$((compiles + 1))
  done
  printf '  %-34s %9.1f ms  %d compiles\n' "$label ($count nodes)" "$(echo "($end - $start) / 1000000" | bc -l)" "$compiles"
}
echo "storm: nodes with their own empty user tier ask for one missing variant at once:"
for round in 1 2 3; do
  storm "alone-$round" $((2000 + 10 * round)) "$remote" 1
  storm "with-remote-$round" $((2001 + 10 * round)) "$remote" "$nodes"
  storm "without-remote-$round" $((2002 + 10 * round)) "" "$nodes"
done
