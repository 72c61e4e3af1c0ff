#!/usr/bin/env bash
# Where kjit prebuild's time goes at 16 jobs (GPU machine, NVRTC, sm_90): the SET=large runs at
# --jobs 1 and 16 with their batches' compile times summed, then one worker alone (no batch, one,
# two) and 16 workers at once. KJIT: the kjit binary (default build/gpu-bundle/bin/kjit).
set -u
TIMEFORMAT="%R s wall %U user %S sys"
tm() { time "$@"; }
K=${KJIT:-build/gpu-bundle/bin/kjit}
w=$(mktemp -d)
run() { rm -rf "$w/tier"; { time "$K" prebuild --targets sm_90 --sets bench/sets/large.json --out "$w/tier" "$@" 2>"$w/err" >"$w/out"; } 2>&1; grep -o 'in [0-9]* ms' "$w/err" | awk '{s+=$2; n++} END {print "batches", n, "compile ms sum", s, "mean", s/n}'; }
echo "== warm-up"; run --jobs 16
for j in 1 16 1 16; do echo "== jobs $j"; run --jobs $j; done
echo "== worker: no batch"
rm -rf "$w/tier"; mkdir -p "$w/tier"
for i in 1 2 3; do tm "$K" __prebuild-worker --targets sm_90 --sets bench/sets/large.json --out "$w/tier" < /dev/null; done
echo "== worker: batch 5"
for i in 1 2 3; do rm -rf "$w/tier"; mkdir -p "$w/tier"; echo 5 | tm "$K" __prebuild-worker --targets sm_90 --sets bench/sets/large.json --out "$w/tier"; done
echo "== worker: batches 5 6"
for i in 1 2 3; do rm -rf "$w/tier"; mkdir -p "$w/tier"; printf '5\n6\n' | tm "$K" __prebuild-worker --targets sm_90 --sets bench/sets/large.json --out "$w/tier"; done
echo "== 16 workers at once, batch 5 each (separate tiers)"
for i in 1 2; do
  start=$(date +%s.%N)
  for p in $(seq 1 16); do (rm -rf "$w/t$p"; mkdir -p "$w/t$p"; echo $((p+4)) | "$K" __prebuild-worker --targets sm_90 --sets bench/sets/large.json --out "$w/t$p" >/dev/null) & done; wait
  echo "16 x 1 batch: $(python3 -c "import sys; print(round($(date +%s.%N) - $start, 3))") s"
done
nproc; grep -m1 "model name" /proc/cpuinfo; cat /proc/loadavg
