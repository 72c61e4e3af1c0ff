#!/usr/bin/env bash
# s33 call I: ncu on the fine-grained gate-up GEMM alone (bfloat16, round 0 of --prefill fine:
# the dense GEMM, the heuristic on random routing, SKIP_PADDING=0, on expert 0's weights, routed
# evenly, routed evenly on expert 0's weights), main's kernels (990c139's bench): what a padded
# tile costs in L2 traffic and tensor-pipe time against the even routing's tiles.
set -o pipefail
B=build/gpu-bundle-main
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step ncu 240 ncu --clock-control none -k 'regex:gemm_wgmma' --launch-count 156 --csv --metrics \
gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
  $B/bench/kjit_moe_gpu_bench --prefill fine
gzip -k $OUT/ncu.log
cat $OUT/steps.txt
grep -E '\| 4096 \| 0 \|' $OUT/ncu.log | grep bfloat16 | grep gate-up | cut -d'|' -f6-10
python3 - "$OUT/ncu.log" <<'PY' | tee $OUT/ncu_runs.txt
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
kernels = {}
for x in csv.DictReader(rows):
    kernels.setdefault(int(x['ID']), [x['Kernel Name'], {}])[1][x['Metric Name']] = float(x['Metric Value'].replace(',', ''))
runs = []  # each timed form: 26 launches (one to warm up, 5 batches of 5)
for i in sorted(kernels):
    name, m = kernels[i]
    if runs and runs[-1][0] == name and len(runs[-1][1]) < 26:
        runs[-1][1].append(m)
    else:
        runs.append([name, [m]])
for name, ms in runs:
    keys = sorted(ms[0])
    mean = {k: sum(m[k] for m in ms[1:]) / max(1, len(ms) - 1) for k in keys}
    print(len(ms), name[:100])
    print('   ', ' | '.join(f"{k.split('__')[1].split('.')[0][:26]}={mean[k]:.4g}" for k in keys))
PY
