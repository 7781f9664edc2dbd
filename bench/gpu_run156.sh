#!/bin/bash
# Session 27 of 2026-12-02/03. Part "tests": every CUDA test binary of main's build (build-gc:
# session 25's review edit of cuda_gemv.cu had not run on a GPU), then the CUDA op, graph and
# engine tests of the RMSNorm-fused-into-the-GEMV build (build-nfc, branch normfuse: session 25's
# 54be875 with the review edits) with OKV_GEMV_NORM=1. Part "bench": bench_step of the two
# builds alternated (main; normfuse with the fusion on), then ncu on the batch-1 decode attention.
#   bash bench/gpu_run156.sh tests|bench      (carry build-gc build-nfc; results under $OUT)
set -u
PART=${1:-tests}
. bench/gpu_env.sh build-gc
. bench/gpu_env.sh build-nfc
END=${END:-560}
runt() {   # build test [env]
  local t=$2; s0=$SECONDS; env ${3:-OKV_X=1} timeout 150 $t > /tmp/t.txt 2>&1; rc=$?
  echo "$1 $(basename $t) rc $rc ($((SECONDS - s0)) s): $(tail -n 1 /tmp/t.txt)"
  [ $rc -eq 0 ] || grep -E "FAIL|fail" /tmp/t.txt | head -8
}
if [ "$PART" = tests ]; then
  echo "== main's tests"
  for t in build-gc/tests/test_*; do runt main $t; done
  echo "== normfuse tests (OKV_GEMV_NORM=1) at $SECONDS s"
  for t in test_cuda_ops test_cuda_graph test_cuda_engine test_cuda_sched test_cuda_resid; do
    [ -x build-nfc/tests/$t ] && runt nf build-nfc/tests/$t OKV_GEMV_NORM=1
  done
  runt nf-off build-nfc/tests/test_cuda_engine
  echo "== compute-sanitizer memcheck, test_cuda_graph at $SECONDS s"
  timeout 200 compute-sanitizer --tool memcheck --print-limit 10 build-gc/tests/test_cuda_graph > $OUT/memcheck_graph.txt 2>&1; echo "rc $?"; tail -4 $OUT/memcheck_graph.txt
  echo "done at $SECONDS s"
  exit 0
fi
S8="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
ST="-m train/checkpoints/run10/target --device cuda --steps 50 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25"
SS="--config bench/configs/smollm2-135m --device cuda --steps 50 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense --cache-factor 2 --sticky 0.25"
for round in 1 2; do
  for v in "main OKV_X=1" "nf OKV_GEMV_NORM=1"; do
    set -- $v; B=build-gc; [ $1 = nf ] && B=build-nfc
    [ $SECONDS -lt $((END - 150)) ] || { echo "skipped step $v: no time"; continue; }
    echo "-- $v"
    env $2 timeout 50 $B/bench/bench_step $S8 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed "s/^/$1 8b /" | tee -a $OUT/step.md
    env $2 timeout 30 $B/bench/bench_step $ST 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed "s/^/$1 trained /" | tee -a $OUT/step.md
    env $2 timeout 30 $B/bench/bench_step $SS 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed "s/^/$1 smollm2 /" | tee -a $OUT/step.md
  done
done
echo "== ncu: decode attention, batch 1 and 4, 8K and 32K, at $SECONDS s"
for ctx in 8192 32768; do
  timeout 120 ncu --clock-control none -k regex:attn2 -s 20 -c 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
    build-gc/bench/cuda_attention --ctx $ctx --max-batch 1 > $OUT/ncu_attn_$ctx.txt 2>&1
  echo "ctx $ctx rc $?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Grid Size|Achieved Occupancy|Stall|Registers|Waves" $OUT/ncu_attn_$ctx.txt | head -24
done
echo "done at $SECONDS s"
