#!/bin/bash
# GPU session of 2026-11-30 (10), one H200: does keeping the first layers dense close the
# 4-point gap to dense at 32K / 2048 (current 95, oracle 95, dense 99; gpu_run47)? The trained
# target (8 layers), N = 100, seed 0, serve defaults (cache factor 2, sticky 0.25).
#   bash bench/gpu_run50.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
run() {  # task budgets modes dense-layers
  local task=$1 b=$2 m=$3 d=$4
  local tag=${task}_${b//,/_}_${m//,/_}_dl$d
  timeout 150 build-gc/oasiskv eval --sweep --task $task --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $b --predict $m --kv-cache-factor 2 --kv-sticky 0.25 \
    --dense-layers $d --seed 0 --device cuda --json $OUT/eval32k_n100_$tag.json > /dev/null 2> $OUT/eval32k_n100_$tag.err
  grep -E "^\[eval\].*right \(" $OUT/eval32k_n100_$tag.err | sed "s/\$/ dense-layers $d/"
}
run niah_single_text 2048 current 1
run niah_single_text 2048 current,oracle 2
run niah_single_text 1024 current 2
run vt 2048 current 2
