#!/bin/bash
# GPU session of 2026-11-30 (11), one H200: per-token key codes on the CUDA backend.
# (1) the CUDA tests (test_cuda_ops: code scores against the CPU backend's on 1/2/4 bits, and
# the selection timing with codes; test_cuda_engine: codes2 runs against the CPU and device vs
# host residency with codes; test_cuda_resid, test_cuda_graph); (2) the 32K N = 100
# niah_single_text cells with --kv-key-codes 2 (trained target, seed 0, serve defaults), to set
# beside the diagnostic figures of gpu_run52 (exact / codes2 oracle 99, Quest 87 / 95, dense 99).
# Run before the blend with the bound became the default: the codes' max alone (now OKV_CODES_BLEND=0).
#   bash bench/gpu_run54.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
for t in test_cuda_ops test_cuda_engine test_cuda_resid test_cuda_graph; do
  timeout 200 build-gc/tests/$t > $OUT/$t.txt 2>&1; echo "$t: exit $?"
  grep -E "key codes|codes2|select perf|checks|FAIL" $OUT/$t.txt | tail -12
done
ev() {  # tag bits budgets modes
  timeout ${T_CELL:-150} build-gc/oasiskv eval --sweep --task niah_single_text --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $3 --predict $4 --kv-key-codes $2 --kv-cache-factor 2 --kv-sticky 0.25 \
    --seed 0 --device cuda --json $OUT/eval_$1.json > /dev/null 2> $OUT/eval_$1.err
  grep -E "^\[eval\].*right \(" $OUT/eval_$1.err | sed "s/\$/ codes $2/"
  grep -iE "error" $OUT/eval_$1.err | head -3
}
ev codes2_2048 2 2048 current,oracle
ev codes2_512_1024 2 512,1024 current
ev codes2_256_4096 2 256,4096 current
