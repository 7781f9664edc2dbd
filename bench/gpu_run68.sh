#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: vt at 32K, budget 2048, N = 100, with lookahead from
# the project's draft model (one draft a step): does a drafter that can guess the next variable
# name close the gap between `current` (72) and the oracle (79)? With Quest's bound, then with
# the default key codes (73 with `current`).
#   bash bench/gpu_run68.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
ev() {  # tag extra...
  local tag=$1; shift
  timeout 80 build-gc/oasiskv eval --sweep --task vt --model train/checkpoints/run3/target --context-len 32768 \
    --num-samples 100 --kv-budget 2048 --predict lookahead --draft model:train/checkpoints/run3/draft --spec-tokens 1 \
    --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --json $OUT/eval_vt_draft_$tag.json "$@" > /dev/null 2> $OUT/e_$tag.err
  echo "$tag rc $?: $(grep -E '^\[eval\].*right \(' $OUT/e_$tag.err | tail -1) $(grep -iE 'accept' $OUT/e_$tag.err | tail -1)"
}
ev quest
ev codes2 --kv-key-codes 2
