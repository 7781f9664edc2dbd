#!/bin/bash
# Prepared for the next GPU session (one H200); not yet run. (1) test_cuda_ops with the
# exact-score diagnostic's check (new in session 10); (2) the rest of the 32K N = 100 table of
# the block-score diagnostics (bench/ACCURACY.md): 2-bit codes with `current` at 256 / 512 /
# 1024 / 4096, 1-bit codes at 2048, and vt with codes2. ~36 s a cell.
#   bash bench/gpu_run53.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
timeout 120 build-gc/tests/test_cuda_ops > $OUT/test_cuda_ops.txt 2>&1; echo "test_cuda_ops: exit $?"
grep -E "exact-score|checks|FAIL" $OUT/test_cuda_ops.txt | tail -5
ev() {  # tag score task budgets modes
  OKV_SELECT_SCORE=$2 timeout 200 build-gc/oasiskv eval --sweep --task $3 --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $4 --predict $5 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 \
    --device cuda --json $OUT/eval_$1.json > /dev/null 2> $OUT/eval_$1.err
  grep -E "^\[eval\].*right \(" $OUT/eval_$1.err | sed "s/\$/ score $2/"
}
ev codes2_cur_256_512 codes2 niah_single_text 256,512 current
ev codes2_cur_1024_4096 codes2 niah_single_text 1024,4096 current
ev codes1_2048 codes1 niah_single_text 2048 current,oracle
ev vt_codes2 codes2 vt 2048 current,oracle
