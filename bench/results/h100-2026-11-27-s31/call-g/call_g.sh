#!/usr/bin/env bash
# s31 call G (H100): where the fine-grained layer's GEMM time goes, under ncu: fused_moe's two
# grouped GEMMs and the dense GEMMs of the same FLOPs, once each (kjit_moe_gpu_bench --profile):
# DRAM and L2 bytes, the tensor pipes' busy share, the time.
set -o pipefail
B=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$B/lib KJIT_CACHE_DIR=/tmp/kjit-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,driver_version --format=csv | tee $OUT/steps.txt
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS; timeout $limit "$@" > $OUT/$name.log 2>&1; echo "== $name exit $? in $((SECONDS - t)) s" | tee -a $OUT/steps.txt; }
$B/bench/kjit_moe_gpu_bench --profile > /dev/null 2>&1 # compiles into the cache first
step ncu 240 ncu --clock-control none -k 'regex:moe_gemm|gemm_wgmma|moe_gather|moe_combine|moe_align' --csv \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second \
  $B/bench/kjit_moe_gpu_bench --profile
cat $OUT/steps.txt
python3 - $OUT/ncu.log <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; ix = {h: i for i, h in enumerate(head)}
per = collections.OrderedDict()
for r in rows[1:]:
    key = r[ix["ID"]]
    per.setdefault(key, {"name": r[ix["Kernel Name"]][:60]})[r[ix["Metric Name"]]] = (r[ix["Metric Value"]], r[ix["Metric Unit"]])
for k, m in per.items():
    print(k, m["name"], " | ".join(f"{n.split('.')[0]}={v} {u}" for n, (v, u) in m.items() if n != "name"))
PY
