#!/usr/bin/env bash
# kjit_prebuild() end to end (cmake/KjitPrebuild.cmake): configures and builds prebuild_project
# with the kjit CLI of this tree, then installs it. Checks that a CMake list of targets reaches
# kjit as one --targets, that kjit's own PREBUILD_KERNELS in the environment does not filter the
# library's sets, that SKIP_UNSUPPORTED builds the supported targets and names the others, and
# that the tier installs under the library's own prefix. Exit 77 (skipped) without hiprtc.
#   kjit_prebuild_test.sh KJIT_CLI KJIT_PREBUILD_MODULE WORK_DIR
set -euo pipefail
cli=$1 module=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
if [[ $("$cli" targets --json) != *'"compiler": "hiprtc"'* ]]; then
  echo "skipped: hiprtc is not available"; exit 77
fi
rm -rf "$work" && mkdir -p "$work"
# gfx1201 is listed by no hiprtc before ROCm 6.4 (jit/src/compiler_releases.cpp).
cmake -S "$here/prebuild_project" -B "$work/build" -G Ninja -DKJIT_CLI="$cli" -DKJIT_PREBUILD_MODULE="$module" \
  "-DTARGETS=gfx90a;gfx908;gfx1201" >/dev/null
PREBUILD_KERNELS=2 cmake --build "$work/build" >"$work/build.log" 2>&1 || {
  cat "$work/build.log"; echo "FAIL: the build failed"; exit 1; }
cat "$work/build.log"
tier=$work/build/mylib_kernels-prebuilt
# version_directory ROOT: the tier at ROOT's version directory, as the CLI reports its layout.
version_directory() {
  KJIT_CACHE_DIR=$1 "$cli" cache stats --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["layout"]["user"]["version_directory"])'
}
entries=$(version_directory "$tier")
for target in gfx90a gfx908; do
  count=$(find "$entries/$target" -name '*.kjit' | wc -l)
  [[ $count == 2 ]] || { echo "FAIL: $count entries for $target, expected 2"; exit 1; }
done
if [[ -d $entries/gfx1201 ]]; then
  echo "this hiprtc builds gfx1201"
else
  grep -q "warning: skipping gfx1201" "$work/build.log" || { echo "FAIL: gfx1201 not named"; exit 1; }
fi
cmake --install "$work/build" --prefix "$work/prefix" >/dev/null
installed=$(find "$(version_directory "$work/prefix/share/mylib/prebuilt")" -name '*.kjit' | wc -l)
[[ $installed -ge 4 ]] || { echo "FAIL: $installed entries installed in share/mylib/prebuilt"; exit 1; }
echo "kjit_prebuild: two targets, its own level, skipped targets named, installed under its prefix"
