#!/usr/bin/env bash
# Real header libraries through kjit compile -I, each compiled, then found again in a fresh process
# (a disk hit through its header manifest), each result checked:
#   - a generated tree of 500 headers (kjit_header_library --generate) on NVRTC (sm_90), hiprtc 5.2
#     (gfx90a) and, where tools/rocm-root has them, hiprtc 6.4 and 7.2 (gfx942): the kernel writes
#     lib::f0(1), which the tree makes the constant 125000 (0x1e848); the disassembly must hold it;
#   - CUB's BlockScan (bench/header_libraries/cub_block_scan.cu) through NVRTC with
#     -I /usr/local/cuda/include/cccl: the cubin's kernel symbol and resources;
#   - rocPRIM's block_reduce (bench/header_libraries/rocprim_block_reduce.hip) through hiprtc 6.4
#     and 7.2 with sid's librocprim-dev headers: ROCPRIM_INCLUDE holds its -I options (directories
#     inside this repository, so that the ROCm roots see them: rocPRIM's, HIP's, libstdc++'s).
# Usage: bench/header_libraries.sh [BUILD_DIR]   (default build/release)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
kjit=$PWD/$build/tools/kjit
work=$PWD/$build/header-libraries
rm -rf "$work" && mkdir -p "$work"
"$build/bench/kjit_header_library" --generate "$work" 500

# compile LABEL RUNNER... -- ARGS: a miss then a hit in a fresh process; prints both.
compile() {
  local label=$1 runner=()
  shift
  while [[ $1 != -- ]]; do runner+=("$1"); shift; done
  shift
  local miss hit
  miss=$("${runner[@]}" "$kjit" compile "$@" --json 2>&1) || { echo "$label: FAILED: $miss"; return 1; }
  hit=$("${runner[@]}" "$kjit" compile "$@" --json 2>&1)
  python3 - "$label" "$miss" "$hit" <<'PY'
import json, sys
label, miss, hit = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"{label}: {miss['origin']} in {miss['compile_ms']:.0f} ms, then {hit['origin']} in "
      f"{hit['elapsed_ms']:.2f} ms, {hit['code_bytes']} bytes, key {hit['key'][:16]}")
assert miss['origin'] == 'compiled' and hit['origin'] == 'user cache' and hit['key'] == miss['key']
PY
}

# holds_constant LABEL ENTRY: the code object in the entry file holds the 32-bit immediate
# 125000 (NVIDIA has no disassembler here; the AMD disassembly reads "v_mov_b32 v1, 0x1e848").
holds_constant() {
  if python3 -c 'import sys; sys.exit(0 if (125000).to_bytes(4, "little") in open(sys.argv[1], "rb").read() else 1)' "$2"; then
    echo "$1: the code holds lib::f0(1) = 125000"
  else
    echo "$1: FAILED: 125000 not found in the code object"
  fi
}

key_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])'; }
entry_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["entry"])'; }
tree=(--source "$work/tree.cu" --kernel tree -p T=int -I "$work/tree")

export KJIT_CACHE_DIR=$work/cache KJIT_PREBUILT_DIR=$work/none
compile "tree, NVRTC, sm_90" env -- "${tree[@]}" --target sm_90
holds_constant "tree, NVRTC, sm_90" "$("$kjit" compile "${tree[@]}" --target sm_90 --json | entry_of)"
compile "tree, hiprtc 5.2, gfx90a" env -- "${tree[@]}" --target gfx90a
holds_constant "tree, hiprtc 5.2, gfx90a" "$("$kjit" compile "${tree[@]}" --target gfx90a --json | entry_of)"
compile "CUB block_scan, NVRTC, sm_90" env -- --source bench/header_libraries/cub_block_scan.cu \
  --kernel block_scan -p T=int -p THREADS=128 -I /usr/local/cuda/include/cccl --target sm_90
"$kjit" cache show "$("$kjit" compile --source bench/header_libraries/cub_block_scan.cu \
  --kernel block_scan -p T=int -p THREADS=128 -I /usr/local/cuda/include/cccl --target sm_90 \
  --json | key_of)" | sed -n '/^kernels/,/^key inputs/p' | head -6
for release in 6.4 7.2; do
  rocm=(tools/rocm-root --run "$release" env KJIT_CACHE_DIR="$work/cache-$release" KJIT_PREBUILT_DIR="$work/none")
  compile "tree, hiprtc $release, gfx942" "${rocm[@]}" -- "${tree[@]}" --target gfx942
  holds_constant "tree, hiprtc $release, gfx942" \
    "$("${rocm[@]}" "$kjit" compile "${tree[@]}" --target gfx942 --json | entry_of)"
  if [[ -n ${ROCPRIM_INCLUDE:-} ]]; then
    compile "rocPRIM block_reduce, hiprtc $release, gfx942" "${rocm[@]}" -- \
      --source bench/header_libraries/rocprim_block_reduce.hip --kernel block_reduce -p T=int \
      -p THREADS=256 $ROCPRIM_INCLUDE --target gfx942
  fi
done
