#!/usr/bin/env bash
# The README's Python install, as a user runs it: a fresh venv (Debian's interpreter, its
# site-packages visible for setuptools and wheel), `pip install --no-build-isolation --no-index`
# of a copy of python/ against this build (no package index is reached: --no-index) with the
# minimal prebuilt level for gfx90a inside (PREBUILD_KERNELS, GPU_ARCHS), then the installed
# package used from another directory: its own library, command and (where the build has it)
# launch extension, a compile, and KJIT_MODE=prebuilt served from the wheel's tier.
#   install_check.sh PYTHON SOURCE_DIR BUILD_DIR
set -euo pipefail
python=$1 source_dir=$2 build_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp -r "$source_dir/python" "$work/src"
"$python" -m venv --system-site-packages "$work/venv"
PREBUILD_KERNELS=3 GPU_ARCHS=gfx90a KJIT_BUILD_DIR=$build_dir "$work/venv/bin/pip" install --quiet --no-build-isolation --no-index \
  "$work/src"
cd "$work"
expect_fastlaunch=0
[[ -f $build_dir/python/fastlaunch/_fastlaunch.abi3.so ]] && expect_fastlaunch=1
KJIT_EXPECT_FASTLAUNCH=$expect_fastlaunch env -u KJIT_C_LIBRARY -u KJIT_CLI -u KJIT_FASTLAUNCH KJIT_CACHE_DIR="$work/cache" "$work/venv/bin/python" - <<'PY'
import os, pathlib, subprocess, sys
import kjit
from kjit import _native
venv = pathlib.Path(sys.prefix)
library = pathlib.Path(_native.lib().path)
assert venv in library.parents, f"loaded {library}, not the installed copy under {venv}"
fastlaunch = _native.fastlaunch()  # where the build has it (python3-dev), the wheel carries it
if os.environ["KJIT_EXPECT_FASTLAUNCH"] == "1":
    assert fastlaunch and venv in pathlib.Path(fastlaunch.__file__).parents, fastlaunch
tmpl = kjit.Template("install_check", "template <int N> __global__ void k(float* x) "
                     "{ x[threadIdx.x] = N; }", params={"N": kjit.integer(1, 8)},
                     arguments=["float*"], kernel="k")
try:
    code = kjit.Runtime().compile(tmpl, {"N": 2}, "gfx90a")
    print("install check: compiled", code.expression, "for", code.target, "origin", code.origin)
except kjit.CompilerUnavailable as error:
    print("install check: no hiprtc, compile skipped:", error.message)
out = subprocess.run([sys.executable, "-m", "kjit", "templates"], capture_output=True, text=True,
                     check=True).stdout
assert "rms_norm" in out, out
# KJIT_MODE=prebuilt, an empty user tier: the wheel's tier serves level 3's scale<half, 4096>,
# and a variant outside it is an error naming it.
check = """
import kjit
rt = kjit.Runtime()
code = rt.compile(kjit.Template.builtin("scale"), {"T": "half", "N": 4096}, "gfx90a")
assert code.origin == "prebuilt", code.origin
try:
    rt.compile(kjit.Template.builtin("scale"), {"T": "half", "N": 4095}, "gfx90a")
    raise SystemExit("a variant outside the prebuilt tier was served")
except kjit.NotPrebuilt as error:
    assert "4095" in error.message, error.message
print("install check: prebuilt tier of the wheel served", code.expression)
"""
subprocess.run([sys.executable, "-c", check], check=True,
               env={**os.environ, "KJIT_MODE": "prebuilt", "KJIT_CACHE_DIR": "prebuilt-user-tier"})
print("install check: passed,", library)
PY
