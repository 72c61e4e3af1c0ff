#!/usr/bin/env bash
# skinny7 call 1: what cuBLAS runs for F.linear at 64 / 128 rows (ncu, torch.profiler), and the
# device time of every gemm_wgmma variant swept at 128 rows of 4096 x 4096 (ncu, one launch each).
D=.dev-skinny7; B=$D/gpu-bundle
export KJIT_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/$B/python KJIT_C_LIBRARY=$PWD/$B/lib/libkjit_c.so
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 100 ncu --clock-control none --nvtx --section SpeedOfLight --section LaunchStats \
  --metrics dram__bytes_read.sum,lts__t_bytes.sum python3 $D/kernels.py ncu >$OUT/ncu-linear.txt 2>&1
echo "ncu linear rc=$? $(( $(date +%s) - s )) s"
grep -E '^  [A-Za-z_].*\(.*\)x\(|<0,|Duration|Grid Size|Cluster Size|Block Size|Dynamic Shared Memory Per|dram__bytes_read|lts__t_bytes|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Registers Per' $OUT/ncu-linear.txt | grep -v -E 'distribution|elementwise|fill' | cut -c1-170
s=$(date +%s)
timeout 60 python3 $D/kernels.py prof >$OUT/prof.txt 2>&1
echo "prof rc=$? $(( $(date +%s) - s )) s"; cut -c1-400 $OUT/prof.txt
s=$(date +%s)
KJIT_BENCH_LINEAR_WEIGHTS=4096x4096 KJIT_BENCH_LINEAR_M=128 KJIT_BENCH_LINEAR_LAUNCHES=1 KJIT_BENCH_WGMMA_SWEEP=1 \
KJIT_BENCH_LINEAR_ONLY=1 timeout 150 ncu --clock-control none -k regex:gemm_wgmma --launch-count 170 --csv \
  --metrics gpu__time_duration.sum,launch__grid_size,launch__shared_mem_per_block_dynamic,dram__bytes_read.sum,lts__t_bytes.sum,sm__cycles_active.avg \
  $B/bench/kjit_gemm_gpu_bench --skinny-fp8 >$OUT/ncu-sweep.csv 2>&1
echo "ncu sweep rc=$? $(( $(date +%s) - s )) s"
grep -E 'wgmma variant|^\| bfloat16' $OUT/ncu-sweep.csv | cut -c1-200
python3 - $OUT/ncu-sweep.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; ix = {h: i for i, h in enumerate(head)}
per = collections.OrderedDict()
for r in rows[1:]:
    per.setdefault(r[ix["ID"]], {})[r[ix["Metric Name"]]] = r[ix["Metric Value"]]
ids = list(per)
for i in range(0, len(ids), 6):
    g = [per[j] for j in ids[i:i + 6]]
    d = sorted(float(x["gpu__time_duration.sum"]) / 1e3 for x in g)
    x = g[-1]
    print(f"group {i // 6}: grid {x['launch__grid_size']} smem {x['launch__shared_mem_per_block_dynamic']} "
          f"us {' '.join(f'{v:.2f}' for v in d)} dram MB {float(x['dram__bytes_read.sum'])/1e6:.1f} "
          f"L2 MB {float(x['lts__t_bytes.sum'])/1e6:.1f} sm active cyc {x['sm__cycles_active.avg']}")
PY
