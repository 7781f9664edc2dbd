#!/bin/bash
# GPU session of 2026-12-01 (20), one H200: why run 8's target loses at budget 2048 (gpu_run128):
# run 3's target on the same command (a control for the engine), then run 8's with 2-bit key
# codes, with the oracle, and at 4096.
#   bash bench/gpu_run129.sh      (carry build-gc2 build-tr8b; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
E="build-gc2/oasiskv eval --sweep --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda"
run() { tag=$1; shift; left=$((440 - SECONDS)); [ $left -lt 30 ] && return
  timeout $left $E "$@" --json $OUT/$tag.json 2>&1 | grep "^| [a-z]" ; echo "$tag at $SECONDS s"; }
run run3_niah --task niah_single_text --model train/checkpoints/run3/target --kv-budget dense,2048 --predict current
run r8_codes --task niah_single_text,niah_multikey,niah_multiquery --model build-tr8b/target --kv-budget 2048 --predict current --kv-key-codes 2
run r8_oracle --task niah_single_text,niah_multikey --model build-tr8b/target --kv-budget 2048 --predict oracle
run r8_4096 --task niah_single_text,niah_multikey --model build-tr8b/target --kv-budget 4096 --predict current
