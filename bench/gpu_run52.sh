#!/bin/bash
# GPU session of 2026-11-30 (10), one H200: is the 4-point gap to dense at 32K / 2048 the Quest
# bound's? The selection diagnostics (OKV_SELECT_SCORE, cuda_select.cu / cpu_select.c): exact =
# the true max of q.k over each candidate block (read from the host tier; a diagnostic, not a
# serving path), codes2 = that max with each key channel rounded to 4 levels of the block's
# summary range. Trained target, niah_single_text, N = 100, seed 0, serve defaults.
# First a check against the CPU figures at 2K / 128 (CPU: bound 15/20, exact 19/20, codes2 19/20).
#   bash bench/gpu_run52.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
ev() {  # tag score ctx n budgets modes
  OKV_SELECT_SCORE=$2 timeout ${T_CELL:-100} build-gc/oasiskv eval --sweep --task niah_single_text --model train/checkpoints/run3/target \
    --context-len $3 --num-samples $4 --kv-budget $5 --predict $6 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda \
    --json $OUT/eval_$1.json > /dev/null 2> $OUT/eval_$1.err
  grep -E "^\[eval\].*right \(" $OUT/eval_$1.err | sed "s/\$/ score $2/"
}
ev 2k_exact exact 2048 20 128 oracle
ev 32k_exact_2048_oracle exact 32768 100 2048 oracle
ev 32k_codes2_2048_oracle codes2 32768 100 2048 oracle
ev 32k_exact_2048_current exact 32768 100 2048 current
ev 32k_exact_1024_oracle exact 32768 100 1024 oracle
