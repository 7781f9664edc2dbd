#!/bin/bash
# GPU session of 2026-11-30 (14), one H200: what the FP8 E4M3 host tier costs in accuracy. The
# trained target at 32K (N = 100, seed 0, current, serve defaults: cache factor 2, sticky 0.25),
# niah_single_text and vt at budget 2048: Quest's bound with the bf16 and the fp8 host tier, and
# 2-bit key codes with the fp8 tier (section 17 / ACCURACY.md hold codes with bf16: 99 and 73).
#   bash bench/gpu_run84.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
ev() {  # task host codes
  /usr/bin/time -f "%e s" timeout 120 build-gc/oasiskv eval --task $1 --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget 2048 --predict current --kv-key-codes $3 --kv-cache-factor 2 \
    --kv-sticky 0.25 --kv-host-dtype $2 --seed 0 --device cuda --json $OUT/eval_$1_$2_codes$3.json > /dev/null 2> $OUT/e_$1_$2_$3.err
  echo "$1 host $2 codes $3: $(grep -E '^\[eval\].*right \(' $OUT/e_$1_$2_$3.err) $(tail -1 $OUT/e_$1_$2_$3.err)"
}
for t in niah_single_text vt; do
  ev $t auto 0; ev $t fp8 0; ev $t fp8 2
done
