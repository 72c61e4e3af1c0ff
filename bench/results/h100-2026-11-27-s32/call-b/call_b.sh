#!/usr/bin/env bash
# s32 call B: the grouped GEMMs with every tile on one expert's weights (the weights' DRAM
# traffic gone), and ncu on the grouped GEMMs (heuristic, PREFETCH 4, one expert) and dense.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
step prefill 120 $B/bench/kjit_moe_gpu_bench --prefill fine PREFETCH=4
step ncu 300 ncu --clock-control none -k 'regex:gemm_wgmma' --launch-count 240 --csv --metrics \
gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
  $B/bench/kjit_moe_gpu_bench --prefill fine PREFETCH=4
cat $OUT/steps.txt
grep -E '\| 4096 \|' $OUT/prefill.log | grep -v "layer: dense" | cut -d'|' -f3,5-10
python3 - "$OUT/ncu.log" <<'PY' | tee $OUT/ncu_runs.txt
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
kernels = {}
for x in csv.DictReader(rows):
    kernels.setdefault(int(x['ID']), [x['Kernel Name'], {}])[1][x['Metric Name']] = float(x['Metric Value'].replace(',', ''))
runs = []  # consecutive launches of one kernel
for i in sorted(kernels):
    name, m = kernels[i]
    if runs and runs[-1][0] == name:
        runs[-1][1].append(m)
    else:
        runs.append([name, [m]])
for name, ms in runs:
    keys = sorted(ms[0])
    mean = {k: sum(m[k] for m in ms) / len(ms) for k in keys}
    print(len(ms), name[:100])
    print('   ', ' | '.join(f"{k.split('__')[1].split('.')[0][:26]}={mean[k]:.4g}" for k in keys))
PY
