#!/bin/bash
# Session 25 of 2026-12-02, after gpu_run152: the defaults now (GEMV: four columns a warp where a
# launch has >= 2048 output columns, programmatic dependent launch on).
#  1. every CUDA test binary with the defaults;
#  2. cuda_gemv with the defaults on the 8B, trained and SmolLM2 shapes;
#  3. decode attention at batch 1-4: the split policy against forced item sizes (--kpi);
#  4. bench_step: the defaults against the session's start (OKV_GEMV_COLS=2 OKV_PDL=0), alternated.
#   bash bench/gpu_run153.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
END=${END:-570}
echo "== tests"
for t in $B/tests/test_*; do
  s0=$SECONDS; timeout 150 $t > /tmp/t.txt 2>&1; rc=$?
  echo "$(basename $t) rc $rc ($((SECONDS - s0)) s): $(tail -n 1 /tmp/t.txt)"
  [ $rc -eq 0 ] || grep -E "FAIL|fail" /tmp/t.txt | head -5
done
echo "== cuda_gemv (defaults) at $SECONDS s"
timeout 60 $B/bench/cuda_gemv --shapes 8b,trained,smollm2 > $OUT/gemv_default.md 2>&1; grep -E "^\| [a-z0-9]" $OUT/gemv_default.md
echo "== attention split sizes at $SECONDS s"
timeout 90 $B/bench/cuda_attention --ctx 8192,32768 --max-batch 4 --kpi 0,128,256,512,1024,2048 > $OUT/attn_kpi.txt 2>&1; cat $OUT/attn_kpi.txt | tail -40
echo "== bench_step at $SECONDS s"
S8="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5 --batch 1,4,16 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
S832="--config bench/configs/llama3-8b --device cuda --steps 20 --warmup 5 --batch 1,4 --ctx 32768 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
ST="-m train/checkpoints/run10/target --device cuda --steps 50 --warmup 5 --batch 1,4,16 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25"
SS="--config bench/configs/smollm2-135m --device cuda --steps 50 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense --cache-factor 2 --sticky 0.25"
for round in 1 2; do
  for v in "OKV_GEMV_COLS=2 OKV_PDL=0" "OKV_X=default"; do
    [ $SECONDS -lt $((END - 100)) ] || { echo "skipped step $v: no time"; continue; }
    echo "-- $v"
    env $v timeout 60 $B/bench/bench_step $S8 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/8b /' | tee -a $OUT/step.md
    env $v timeout 60 $B/bench/bench_step $S832 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/8b /' | tee -a $OUT/step.md
    env $v timeout 40 $B/bench/bench_step $ST 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/trained /' | tee -a $OUT/step.md
    env $v timeout 40 $B/bench/bench_step $SS 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/smollm2 /' | tee -a $OUT/step.md
  done
done
echo "done at $SECONDS s"
