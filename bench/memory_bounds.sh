#!/usr/bin/env bash
# Peak RSS (GNU time's maximum resident set size) of what issue 23 bounds, for each kjit build
# given (the first is the baseline, e.g. a build of the commit before the change; the last one's
# kjit_make_cache makes the cache):
#   - one `kjit compile` (scale<half, 64>, sm_90) whose remote holds a value of 64 MiB (the most
#     a remote value may hold) or VALUE_MIB under the variant's key (zeros, made on the server
#     with SETRANGE: not an entry), against the same compile with the key absent (a miss);
#   - `kjit cache export` and `import` of a user tier of COUNT entries made by kjit_make_cache,
#     those past its real compiles padded to CODE_MIB (see bench/make_cache.cpp).
# A redis-server of its own on a free loopback port; everything under a work directory in TMPDIR
# (default /tmp), removed at the end.
#
#   bench/memory_bounds.sh BUILD... [-- VALUE_MIB COUNT CODE_MIB]   (default 300 256 32)
set -euo pipefail
builds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do builds+=("$(realpath "$1")"); shift; done
[ $# -gt 0 ] && shift
value_mib=${1:-300}
count=${2:-256}
code_mib=${3:-32}
[ ${#builds[@]} -gt 0 ] || { echo "usage: $0 BUILD... [-- VALUE_MIB COUNT CODE_MIB]" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kjit-memory-bench-XXXXXX")
source "$(dirname "$0")/lib/redis.bash"
source "$(dirname "$0")/lib/layout.bash"
start_redis "$work"
export KJIT_PREBUILT_DIR="$work/none" KJIT_LOG_LEVEL=error

peak_kb() { /usr/bin/time -f %M -o "$work/time" "$@" >/dev/null && cat "$work/time"; }
variant=(compile scale -p T=half -p N=64 --target sm_90)

first=${builds[0]}
key=$(KJIT_CACHE_DIR="$work/keys" "$first/tools/kjit" "${variant[@]}" --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
name="$(kjit_remote_entry_prefix "${builds[-1]}/tools/kjit" "$work/keys")sm_90/$key"
"${builds[-1]}/bench/kjit_make_cache" "$work/source" "$count" "$code_mib" >&2
entries=$(kjit_layout "${builds[-1]}/tools/kjit" "$work/source" version_directory)
echo "cache: $(du -sh --apparent-size "$entries" | cut -f1) in $count entries," \
  "the largest $(find "$entries" -name '*.kjit' -printf '%s\n' | sort -n | tail -1) bytes"

for build in "${builds[@]}"; do
  kjit=$build/tools/kjit
  echo "== $build"
  redis-cli -p "$port" del "$name" >/dev/null
  rm -rf "$work/node"
  echo "compile, remote miss:               $(KJIT_CACHE_DIR="$work/node" \
    KJIT_REMOTE_STORAGE="redis://127.0.0.1:$port" peak_kb "$kjit" "${variant[@]}") KB"
  for mib in 64 "$value_mib"; do # 64: the most a value may hold (kMaxRemoteValueBytes)
    redis-cli -p "$port" del "$name" >/dev/null
    redis-cli -p "$port" setrange "$name" $((mib * 1048576 - 1)) x >/dev/null
    rm -rf "$work/node"
    echo "compile, a ${mib} MiB remote value: $(KJIT_CACHE_DIR="$work/node" \
      KJIT_REMOTE_STORAGE="redis://127.0.0.1:$port" peak_kb "$kjit" "${variant[@]}") KB"
  done
  rm -f "$work/archive"
  echo "cache export:                       $(KJIT_CACHE_DIR="$work/source" \
    peak_kb "$kjit" cache export "$work/archive") KB ($(stat -c %s "$work/archive") bytes)"
  rm -rf "$work/imported"
  echo "cache import:                       $(KJIT_CACHE_DIR="$work/imported" \
    peak_kb "$kjit" cache import "$work/archive") KB"
  rm -rf "$work/imported" "$work/archive"
done
