#!/bin/bash
# GPU session of 2026-11-30 (9), one H200, the session's last minutes: niah_single_text at 32K,
# N = 100, trained target, serve defaults (cache factor 2, sticky 0.25), seed 0: oracle at
# 2048, then current and oracle at 4096, 1024 and 256 (gpu_run35 measured dense 99 and
# current@2048 95); one eval per budget, each JSON written as soon as it is done.
#   bash bench/gpu_run47.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
run() {  # budget modes
  timeout 150 build-gc/oasiskv eval --sweep --task niah_single_text --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $1 --predict $2 --kv-cache-factor 2 --kv-sticky 0.25 \
    --seed 0 --device cuda --json $OUT/eval32k_n100_$1_${2//,/_}.json > /dev/null 2> $OUT/eval32k_n100_$1_${2//,/_}.err
  grep -E "^\[eval\].*right \(" $OUT/eval32k_n100_$1_${2//,/_}.err
}
run 2048 oracle
run 4096 current,oracle
run 1024 current,oracle
run 256 current,oracle
