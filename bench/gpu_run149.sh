#!/bin/bash
# Session 24 of 2026-12-02, planned for the next GPU session (no machine was left for it; session 25 ran its serving pair as the last part of gpu_run152.sh, not this script): gpu_run147's n-gram cells (they asked for --spec-tokens without
# --draft, which eval refuses) and one serving pair whose logs go to stdout (gpu_run148's serving runs left
# no JSON, and their logs did not come back: too many files under $OUT).
#   bash bench/gpu_run149.sh      (carry build-gc; JSON under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
M=train/checkpoints/run10
E="$B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2 --predict lookahead --draft ngram --spec-tokens 4 --kv-budget 2048 --task chain"
for v in "ng4:--no-kv-verify-defer" "ng4_defer:--kv-verify-defer" "ng4_vi:--kv-verify-inline"; do
  [ $SECONDS -lt 130 ] || { echo "skipped ${v%%:*}: no time"; continue; }
  echo "== r10_${v%%:*}"; timeout $((150 - SECONDS)) $E --json $OUT/r10_${v%%:*}.json ${v#*:} 2>&1 | grep "^| [a-z]"
done
# serving: 16 chain prompts at 16K, 128 output tokens, c8, n-gram drafts, off / deferred
$B/oasiskv eval --dump-samples /tmp/c16k.jsonl --dump-text -m $M/target --task chain --context-len 16384 --num-samples 16 --seed 0 > /dev/null 2>&1
for v in "ngram:--no-kv-verify-defer" "defer:--kv-verify-defer"; do
  [ $SECONDS -lt 190 ] || { echo "skipped serve ${v%%:*}: no time"; continue; }
  $B/oasiskv serve -m $M/target --port 18411 --kv-budget 2048 --kv-pool-gb 8 --max-num-seqs 16 --ctx 20000 --device cuda \
    --kv-key-codes 2 --no-dense-while-room --kv-host-gb 4 --draft ngram --spec-tokens 4 ${v#*:} > /tmp/serve.log 2>&1 &
  pid=$!
  for i in $(seq 60); do curl -sf http://127.0.0.1:18411/health > /dev/null && break; sleep 0.5; done
  timeout $((230 - SECONDS)) $B/oasiskv bench serve --base-url http://127.0.0.1:18411 --num-prompts 16 --max-concurrency 8 \
    --random-output-len 128 --dataset /tmp/c16k.jsonl --json /tmp/b.json > /tmp/b.txt 2>&1
  echo "== serve ${v%%:*}: bench exit $?"; tail -4 /tmp/b.txt; tail -3 /tmp/serve.log
  python3 -c "import json; d=json.load(open('/tmp/b.json')); print({k: d[k] for k in ('completed','output_throughput','mean_tpot_ms','mean_ttft_ms') if k in d})" 2>&1
  curl -s http://127.0.0.1:18411/metrics | grep -E "^(vllm:spec_decode_num_(drafts|accepted_tokens)_total|oasiskv:(spec_deferred|inline_selections)_total|oasiskv:resident_in_time_ratio)" | tr '\n' ' '; echo
  kill $pid; wait $pid 2>/dev/null
done
echo "done at $SECONDS s"
