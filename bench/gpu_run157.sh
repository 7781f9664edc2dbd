#!/bin/bash
# Session 27: where the batch-1 decode attention (attn2_k, 8K, 18.6 us a layer = 1.86 TB/s in
# gpu_run156's ncu) and the 4-row GEMV (8B shapes, 3.5 TB/s) spend their time: ncu's full set on
# one launch of each, the stall samples per SASS instruction (bench/ncu_hot.py), the raw stall
# metrics, and each kernel's SASS.
#   bash bench/gpu_run157.sh      (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
prof() {   # name kernel-regex skip command...
  local n=$1 k=$2 s=$3; shift 3
  timeout 150 ncu --clock-control none --set full --import-source no -k regex:$k -s $s -c 1 -f -o /tmp/$n "$@" > /tmp/$n.log 2>&1
  echo "$n rc $? ($SECONDS s)"; tail -3 /tmp/$n.log
  ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass > /tmp/${n}_src.csv 2>&1
  python3 bench/ncu_hot.py /tmp/${n}_src.csv 45 > $OUT/${n}_hot.txt 2>&1; head -60 $OUT/${n}_hot.txt
  ncu -i /tmp/$n.ncu-rep --page raw --csv > /tmp/${n}_raw.csv 2>&1
  python3 - /tmp/${n}_raw.csv >> $OUT/${n}_hot.txt <<'PY'
import csv, sys
r = list(csv.reader(open(sys.argv[1])))
h, v = r[0], r[-1]
for a, b in zip(h, v):
    if ('warp_latency_issue_stalled' in a or 'pcsamp_warps_issue_stalled' in a) and b not in ('0', '', '0.00'):
        print(a, b)
    if a in ('gpu__time_duration.sum', 'sm__cycles_active.avg', 'sm__cycles_elapsed.max', 'dram__bytes_read.sum', 'smsp__inst_executed.sum', 'launch__registers_per_thread'):
        print(a, b)
PY
  tail -45 $OUT/${n}_hot.txt | grep -v "^\s*$" | sort -t' ' -k2 -gr | head -30
}
prof attn8k attn2 20 $B/bench/cuda_attention --ctx 8192 --max-batch 1
prof gemv4 gemv_k 100 $B/bench/cuda_gemv --shapes 8b --rows 4 --calls 128
cuobjdump -sass -fun '_Z7attn2_kILi4ELi128ELi32ELi3EEv8att_args' $B/bench/cuda_attention > $OUT/attn2_sass.txt 2>&1 || cuobjdump -sass $B/bench/cuda_attention 2>/dev/null | awk '/Function : .*attn2_kILi4ELi128ELi32ELi3/{p=1} p&&/Function : /&&!/attn2_kILi4ELi128ELi32ELi3/{p=0} p' > $OUT/attn2_sass.txt
wc -l $OUT/attn2_sass.txt
echo "done at $SECONDS s"
