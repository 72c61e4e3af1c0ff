#!/usr/bin/env bash
# authors3: kjit tune --sets on a GPU, then the lookup that follows it.
cd "$(dirname "$0")" # .dev-authors3/: this folder's lib.json, rows.hip, shapes.json under lib/, build/gpu-bundle as bundle/
export KJIT_CACHE_DIR=/tmp/kjit-authors3-cache TIMEFORMAT="(%R s wall)"
K="timeout 150 bundle/bin/kjit"
if ! bundle/bin/kjit --help >/dev/null 2>&1; then
  export LD_LIBRARY_PATH=$PWD/bundle/lib/fallback; echo "(the bundled libstdc++)"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== kjit targets"; $K targets
echo "== 1st: kjit tune --sets lib/lib.json scale_rows --shapes lib/shapes.json --budget 60"
time $K tune --sets lib/lib.json scale_rows --shapes lib/shapes.json --budget 60; echo "exit $?"
echo "== 2nd, same command (--json): the lookup"
time $K tune --sets lib/lib.json scale_rows --shapes lib/shapes.json --budget 60 --json > $OUT/second.json; echo "exit $?"; cat $OUT/second.json
echo "== kjit tune ls"; $K tune ls
echo "== kjit tune ls --json"; $K tune ls --json > $OUT/ls.json; cat $OUT/ls.json
echo "== kjit cache stats"; $K cache stats
echo "== bad input still refused first: --space VEC=3"; $K tune --sets lib/lib.json scale_rows --shapes lib/shapes.json --space VEC=3; echo "exit $?"
