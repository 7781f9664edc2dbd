#!/bin/bash
# Session 27: the decode attention's copies by segments (issue_seg in cuda_attention.cu: a chunk's
# rows copied from one base per block at compile-time offsets, instead of a shuffle and address
# arithmetic per 16 bytes; gpu_run157's ncu counted ~540 of the loop's ~830 instructions a chunk in
# that path). build-gn = the new code, build-gc = before it. The CUDA op tests; cuda_attention of
# both builds at 8K and 32K, batch 1-256 (and the tuning variants at batch 1-4 on the new one);
# ncu of the batch-1 8K kernel (duration, instructions); bench_step 8B batch 1/4/16 at 8K and
# batch 1/4 at 32K, the builds alternated.
#   bash bench/gpu_run158.sh      (carry build-gc build-gn)
set -u
. bench/gpu_env.sh build-gc
. bench/gpu_env.sh build-gn
END=${END:-570}
for t in test_cuda_ops test_cuda_engine test_cuda_graph test_cuda_resid; do
  s0=$SECONDS; timeout 150 build-gn/tests/$t > /tmp/t.txt 2>&1; rc=$?
  echo "new $t rc $rc ($((SECONDS - s0)) s): $(tail -n 1 /tmp/t.txt)"; [ $rc -eq 0 ] || grep -E "FAIL" /tmp/t.txt | head -8
done
for B in build-gc build-gn; do
  echo "== $B cuda_attention at $SECONDS s"
  timeout 120 $B/bench/cuda_attention --ctx 8192,32768 --max-batch 256 > $OUT/attn_$B.txt 2>&1; grep -E "^[0-9]" $OUT/attn_$B.txt | awk '{print $1, $2, $7, $8, $9, $10}'
done
echo "== variants (new) at $SECONDS s"
timeout 100 build-gn/bench/cuda_attention --ctx 8192,32768 --max-batch 4 --variants 0,1,2,4,5,6 > $OUT/attn_var.txt 2>&1; grep -E "^[0-9]" $OUT/attn_var.txt | awk '{print $1, $2, $3, $7, $8, $12}'
echo "== ncu at $SECONDS s"
timeout 90 ncu --clock-control none -k regex:attn2 -s 20 -c 1 --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_active.avg,sm__cycles_elapsed.max,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  build-gn/bench/cuda_attention --ctx 8192 --max-batch 1 2>&1 | grep -E "duration|inst_exec|cycles|dram__"
S8="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5 --batch 1,4,16 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
S32="--config bench/configs/llama3-8b --device cuda --steps 20 --warmup 5 --batch 1,4 --ctx 32768 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
for round in 1 2; do
  for B in build-gc build-gn; do
    [ $SECONDS -lt $((END - 120)) ] || { echo "skipped $B: no time"; continue; }
    echo "-- $B at $SECONDS s"
    timeout 60 $B/bench/bench_step $S8 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed "s/^/$B 8b /" | tee -a $OUT/step.md
    timeout 60 $B/bench/bench_step $S32 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed "s/^/$B 8b /" | tee -a $OUT/step.md
  done
done
echo "done at $SECONDS s"
