#!/usr/bin/env bash
# What comgr's own compile cache saves kjit on a repeated compile, in one ROCm release's root
# (tools/rocm-root): ROUNDS compiles of one variant, each a fresh `kjit compile` process with
# KJIT_REBUILD=1 (kjit's cache bypassed, so hiprtc compiles every time), first with comgr's cache
# as kjit leaves it (on: the first round fills it, the others hit it), then with AMD_COMGR_CACHE=0
# (the baseline: what turning comgr's cache off would cost). Prints each round's compile_ms as kjit
# reports it, and the median of the rounds after the first.
#
#   bench/comgr_cache.sh RELEASE [TARGET] [ROUNDS]     RELEASE 6.4 or 7.2; TARGET gfx11-generic;
#                                                       ROUNDS 5
set -euo pipefail
cd "$(dirname "$0")/.."
release=${1:?release}
target=${2:-gfx11-generic}
rounds=${3:-5}
kjit=build/release/tools/kjit

tools/rocm-root --run "$release" bash -c '
  kjit=$1 target=$2 rounds=$3
  export KJIT_CACHE_DIR=$(mktemp -d) KJIT_REBUILD=1
  unset XDG_CACHE_HOME  # comgr keeps its cache in $HOME/.cache/comgr, the root'"'"'s fresh /tmp
  series() { # series LABEL [VAR=VALUE...]: ROUNDS compiles, their compile_ms, the median after 1
    local label=$1 times=()
    shift
    rm -rf "$HOME/.cache/comgr"
    for ((i = 0; i < rounds; i++)); do
      times+=("$(env "$@" "$kjit" compile rms_norm -p T=bfloat16 -p HIDDEN=4096 -p VEC=8 \
        -p THREADS=256 --target "$target" --json |
        sed -n "s/.*\"compile_ms\": *\([0-9.]*\).*/\1/p" | cut -d. -f1)")
    done
    local median
    median=$(printf "%s\n" "${times[@]:1}" | sort -n | awk "{ a[NR] = \$1 } END { print a[int((NR + 1) / 2)] }")
    echo "| $label | ${times[*]} | $median |"
  }
  echo "| comgr cache | compile_ms of each round | median after the first |"
  echo "| --- | --- | ---: |"
  series "on (as kjit leaves it)"
  series "off (AMD_COMGR_CACHE=0, baseline)" AMD_COMGR_CACHE=0
' bash "$kjit" "$target" "$rounds"
