#!/bin/bash
# Prepared for the next GPU session (one H200): the rest of the 32K, N = 100 table of the
# trained target (bench/ACCURACY.md), serve defaults (cache factor 2, sticky 0.25), seed 0:
# niah_single_text with lookahead (one n-gram draft per step, the best lookahead setting at
# 8K) at every budget; vt dense and at 2048 current / oracle. One eval per cell group, each
# JSON written as soon as it is done (~34 s per cell).
#   bash bench/gpu_run48.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
run() {  # task budgets modes extra...
  local task=$1 b=$2 m=$3; shift 3
  local tag=${task}_${b//,/_}_${m//,/_}
  timeout 200 build-gc/oasiskv eval --sweep --task $task --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $b --predict $m --kv-cache-factor 2 --kv-sticky 0.25 \
    --seed 0 --device cuda "$@" --json $OUT/eval32k_n100_$tag.json > /dev/null 2> $OUT/eval32k_n100_$tag.err
  grep -E "^\[eval\].*right \(" $OUT/eval32k_n100_$tag.err
}
run niah_single_text 2048,4096 lookahead --draft ngram --spec-tokens 1
run niah_single_text 256,1024 lookahead --draft ngram --spec-tokens 1
run vt dense,2048 current,oracle
run niah_single_text 512 current,oracle
