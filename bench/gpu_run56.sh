#!/bin/bash
# GPU session of 2026-11-30 (11), one H200: the codes' max blended with Quest's bound
# (OKV_CODES_BLEND = b: (1 - b) max + b bound), after the max alone lost vt at 32K (48 against the
# bound's 72; gpu_run55). test_cuda_ops, then vt and niah_single_text at 32K, N = 100, trained target,
# --kv-key-codes 2, current, serve defaults. Run before the blend of 0.5 became the default (with
# that default, OKV_CODES_BLEND=0 gives the max alone).
#   bash bench/gpu_run56.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
timeout 200 build-gc/tests/test_cuda_ops > $OUT/ops.txt 2>&1; echo "ops exit $?"
grep -E "blend|checks|FAIL" $OUT/ops.txt | tail -4
ev() {  # blend task budget
  OKV_CODES_BLEND=$1 timeout 150 build-gc/oasiskv eval --sweep --task $2 --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $3 --predict current --kv-key-codes 2 --kv-cache-factor 2 \
    --kv-sticky 0.25 --seed 0 --device cuda --json $OUT/eval_$2_$3_b$1.json > /dev/null 2> $OUT/e.err
  grep -E "^\[eval\].*right \(" $OUT/e.err | sed "s/\$/ codes2 blend $1/"
}
ev 0.5 vt 2048; ev 0.5 niah_single_text 2048; ev 0.5 niah_single_text 512; ev 0.8 vt 2048
