#!/bin/bash
# Session 24 of 2026-12-02, run after gpu_run147 in the same command (output in bench/results/h200_s24/r148
# and run148.txt; its serving runs left no benchmark JSON and their logs did not come back: gpu_run149.sh):
# speculation under a predicted selection, the rest of the picture.
#  1. run 10 at 32K, N = 40, 2-bit key codes at 2048, lookahead with run 10's draft speculating 3 tokens a
#     step, with and without --kv-verify-defer, on the families gpu_run147 leaves out (single needle, qa,
#     multi-key, multi-query): does deferring cost anything where speculation did not hurt?
#  2. serving: 48 chain prompts at 16K (the eval's own, as text), 256 output tokens, concurrency 16, budget
#     2048 with key codes: no drafts / n-gram drafts (4 a step) / + --kv-verify-defer / + --kv-verify-inline
#     (output tok/s, TPOT, spec and inline counters from /metrics); sparse from the start (--no-dense-while-room).
#   bash bench/gpu_run148.sh      (carry build-gc; results under $OUT; END=seconds it may take, default 580:
#                                   the evals leave the last 100 to the serving runs)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
M=train/checkpoints/run10
E="$B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2 --predict lookahead --draft model:$M/draft --spec-tokens 3 --kv-budget 2048"
END=${END:-580}
run() { local left=$((END - 100 - SECONDS)); [ $left -gt 20 ] || { echo "skipped $1: no time"; return; }
  echo "== $1 ($left s left)"; timeout $left $E --json $OUT/$1.json "${@:2}" 2>&1 | grep "^| [a-z]"; }
F=niah_single_text,qa,niah_multikey,niah_multiquery
run r10_la3_rest --task $F --no-kv-verify-defer
run r10_la3_rest_defer --task $F --kv-verify-defer
$B/oasiskv eval --dump-samples $OUT/chain16k.jsonl --dump-text -m $M/target --task chain --context-len 16384 --num-samples 48 --seed 0 > /dev/null 2>&1
echo "chain prompts: $(wc -l < $OUT/chain16k.jsonl)"
for v in "nodraft:" "ngram:--draft ngram --spec-tokens 4 --no-kv-verify-defer" "defer:--draft ngram --spec-tokens 4 --kv-verify-defer" "inline:--draft ngram --spec-tokens 4 --kv-verify-inline"; do
  [ $SECONDS -lt $((END - 30)) ] || { echo "skipped serve ${v%%:*}: no time"; continue; }
  OUT=$OUT/serve PROMPTS_PER_SLOT=3 CTX=20000 KVS=2048 DATASET=$OUT/chain16k.jsonl TAG=${v%%:*} START_S=120 \
    timeout $((END - SECONDS)) bash bench/serve_ab.sh $B "-m $M/target" 8 16384 256 16 2048 \
    "--device cuda --kv-key-codes 2 --no-dense-while-room --kv-host-gb 8 --max-num-seqs 32 ${v#*:}" | grep "^| [a-z]"
  grep -hE "^(vllm:spec_decode_num_(drafts|accepted_tokens)_total|oasiskv:(spec_deferred|inline_selections|stall_seconds)_total|oasiskv:resident_in_time_ratio)" $OUT/serve/metrics_${v%%:*}_2048_c16.txt | tr '\n' ' '; echo
done
echo "done at $SECONDS s"
