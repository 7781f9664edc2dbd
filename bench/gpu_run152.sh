#!/bin/bash
# Session 25 of 2026-12-02, after gpu_run151 (the GEMV variants: 4 columns a warp with PDL
# best): (1) where the 8B batch-1 step's time goes besides the projections (OKV_CUDA_PROFILE=1);
# (2) the decode step with the baseline GEMV, 4 columns a warp, and 4 columns + PDL, on the 8B
# shape, the trained target and the SmolLM2 shape, alternated twice; (3) gpu_run149's serving
# pair (n-gram drafts at 16K, off / deferred) with the server's log on stdout.
#   bash bench/gpu_run152.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
END=${END:-570}
echo "== profile, 8B batch 1 8K dense (default GEMV: 4 columns a warp, no PDL)"
OKV_CUDA_PROFILE=1 OKV_CUDA_PROFILE_SKIP=3 timeout 60 $B/bench/bench_step --config bench/configs/llama3-8b --device cuda --steps 10 --warmup 3 \
  --batch 1 --ctx 8192 --kv-budget dense > $OUT/profile.txt 2>&1
grep -vE "^\|---|^$" $OUT/profile.txt | tail -22
S8="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
ST="-m train/checkpoints/run10/target --device cuda --steps 50 --warmup 5 --batch 1,4,16 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25"
SS="--config bench/configs/smollm2-135m --device cuda --steps 50 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense --cache-factor 2 --sticky 0.25"
for round in 1 2; do
  for v in "OKV_GEMV_COLS=2 OKV_PDL=0" "OKV_GEMV_COLS=4 OKV_PDL=0" "OKV_GEMV_COLS=4 OKV_PDL=1"; do
    [ $SECONDS -lt $((END - 200)) ] || { echo "skipped step $v: no time"; continue; }
    echo "-- $v"
    env $v timeout 60 $B/bench/bench_step $S8 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/8b /'
    env $v timeout 40 $B/bench/bench_step $ST 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/trained /'
    env $v timeout 40 $B/bench/bench_step $SS 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/smollm2 /'
  done
done
echo "== serving at $SECONDS s"
M=train/checkpoints/run10/target
$B/oasiskv eval --dump-samples /tmp/c16k.jsonl --dump-text -m $M --task chain --context-len 16384 --num-samples 16 --seed 0 > /dev/null 2>&1
echo "prompts: $(wc -l < /tmp/c16k.jsonl)"
for v in "ngram:--no-kv-verify-defer" "defer:--kv-verify-defer"; do
  [ $SECONDS -lt $((END - 60)) ] || { echo "skipped serve ${v%%:*}: no time"; continue; }
  $B/oasiskv serve -m $M --port 18411 --kv-budget 2048 --kv-pool-gb 8 --max-num-seqs 16 --ctx 20000 --device cuda \
    --kv-key-codes 2 --no-dense-while-room --kv-host-gb 4 --draft ngram --spec-tokens 4 ${v#*:} > /tmp/serve.log 2>&1 &
  pid=$!
  for i in $(seq 120); do curl -sf http://127.0.0.1:18411/health > /dev/null && break; sleep 0.5; done
  timeout $((END - 20 - SECONDS)) $B/oasiskv bench serve --base-url http://127.0.0.1:18411 --num-prompts 16 --max-concurrency 8 \
    --random-output-len 128 --dataset /tmp/c16k.jsonl --json /tmp/b.json > /tmp/b.txt 2>&1
  echo "== serve ${v%%:*}: bench exit $?"; grep -E "Successful|Failed|Output token|Mean TPOT|Acceptance" /tmp/b.txt; tail -n 4 /tmp/b.txt | head -2; tail -n 3 /tmp/serve.log
  curl -s http://127.0.0.1:18411/metrics | grep -E "^(vllm:spec_decode_num_(drafts|accepted_tokens)_total|oasiskv:(spec_deferred)_total|oasiskv:resident_in_time_ratio)" | tr '\n' ' '; echo
  kill $pid; wait $pid 2>/dev/null
done
echo "done at $SECONDS s"
