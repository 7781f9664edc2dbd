#!/bin/bash
# GPU session of 2026-12-01 (20), one H200: run 8's target (gpu_run126 + gpu_run127, carried as
# build-tr8b) at 32K through the CUDA engine: dense against budget 2048 (`current`, serve defaults),
# one task at a time so that what finishes comes back.
#   bash bench/gpu_run128.sh      (carry build-gc2 build-tr8b; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in niah_multikey vt niah_multiquery qa niah_single_text; do
  left=$((520 - SECONDS)); [ $left -lt 40 ] && break
  timeout $left build-gc2/oasiskv eval --sweep --task $t --model build-tr8b/target --context-len 32768 \
    --num-samples 40 --kv-budget dense,2048 --predict current --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 \
    --device cuda --json $OUT/eval32k_$t.json 2>&1 | grep -v "^\[" | tail -6
  echo "$t exit $? at $SECONDS s"
done
