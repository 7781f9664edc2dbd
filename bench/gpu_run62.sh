#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: the CUDA tests after the fused base + scale acc (as
# the CPU backend), and the 32K accuracy cells of the default key codes (2 bits, blend 0.5) with
# the tensor-core scoring: niah_single_text at budgets 512 and 2048, vt at 2048 (session 11 with
# codes_k: 99, 99, 73). Trained target, current, serve defaults, N = 100.
#   bash bench/gpu_run62.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine resid graph; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL|score [0-9]|exact data|candidates, codes" $OUT/ops.txt | head -8
ev() {  # task budget
  /usr/bin/time -f "%e s" timeout 170 build-gc/oasiskv eval --sweep --task $1 --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $2 --predict current --kv-key-codes 2 --kv-cache-factor 2 \
    --kv-sticky 0.25 --seed 0 --device cuda --json $OUT/eval_$1_$2.json > /dev/null 2> $OUT/e_$1_$2.err
  grep -E "^\[eval\].*right \(" $OUT/e_$1_$2.err | sed "s/\$/ codes2 tensor cores/"; tail -1 $OUT/e_$1_$2.err
}
ev niah_single_text 512; ev vt 2048; ev niah_single_text 2048
