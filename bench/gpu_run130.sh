#!/bin/bash
# GPU session of 2026-12-01 (20), one H200: run 8's target at 32K with 2-bit key codes (what
# rescued its single needles in gpu_run129): vt and qa at 2048, the multi-needle tasks at 4096.
#   bash bench/gpu_run130.sh      (carry build-gc2 build-tr8b; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
E="build-gc2/oasiskv eval --sweep --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --model build-tr8b/target --predict current --kv-key-codes 2"
run() { tag=$1; shift; left=$((200 - SECONDS)); [ $left -lt 20 ] && return
  timeout $left $E "$@" --json $OUT/$tag.json 2>&1 | grep "^| [a-z]" ; echo "$tag at $SECONDS s"; }
run r8_codes_vt_qa --task vt,qa --kv-budget 2048
run r8_codes_4096 --task niah_multikey,niah_multiquery --kv-budget 4096
