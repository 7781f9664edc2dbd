#!/bin/bash
# GPU session of 2026-12-02 (21), one H200: run 9's target at 32K, N = 40, with 2-bit per-token
# key codes (--kv-key-codes 2: half of each selection by the codes' max, half by Quest's bound),
# the two calls made after bench/gpu_run133.sh in the session's last device minutes
# (r9_codes.json, then r9_codes_b.json and r9_codes_axis.json).
#   bash bench/gpu_run134.sh      (carry build-gc2 build-tr9b; JSON under $OUT)
set -u
. bench/gpu_env.sh build-gc2
E="build-gc2/oasiskv eval --sweep --model build-tr9b/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --predict current --kv-key-codes 2"
timeout 200 $E --task chain,niah_multikey --kv-budget 2048 --json $OUT/r9_codes.json 2>&1 | grep "^| [a-z]"
timeout 100 $E --task niah_single_text,vt,niah_multiquery,qa,niah_multivalue --kv-budget 2048 --json $OUT/r9_codes_b.json 2>&1 | grep "^| [a-z]"
timeout 110 $E --task chain,niah_multikey,niah_single_text,vt --kv-budget 1024,512 --json $OUT/r9_codes_axis.json 2>&1 | grep "^| [a-z]"
