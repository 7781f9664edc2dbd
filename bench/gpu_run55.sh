#!/bin/bash
# GPU session of 2026-11-30 (11), one H200: the final codes_k (int8 weights, __dp4a,
# codes staged in shared memory asynchronously): the CUDA tests, the SASS of codes_k<2, 1> for the
# next round of tuning, and 32K N = 100 cells with --kv-key-codes 2 (niah_single_text at 512 and
# 2048, vt at 2048; trained target, seed 0, serve defaults). Run before the blend with the bound
# became the default: these are the codes' max alone (now OKV_CODES_BLEND=0).
#   bash bench/gpu_run55.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
cuobjdump -sass -fun '_Z7codes_kILi2ELi1EEvPKfPK13__nv_bfloat16PKhPKiiS8_S8_iiiiiiPf' build-gc/tests/test_cuda_ops \
  > $OUT/sass_codes_k.txt 2>&1
for t in test_cuda_ops test_cuda_engine test_cuda_resid test_cuda_graph; do
  timeout 200 build-gc/tests/$t > $OUT/$t.txt 2>&1; echo "$t: exit $?"
  grep -E "key codes|codes2|select perf|checks|FAIL" $OUT/$t.txt | tail -12
done
ev() {  # tag task bits budgets modes
  timeout ${T_CELL:-150} build-gc/oasiskv eval --sweep --task $2 --model train/checkpoints/run3/target \
    --context-len 32768 --num-samples 100 --kv-budget $4 --predict $5 --kv-key-codes $3 --kv-cache-factor 2 --kv-sticky 0.25 \
    --seed 0 --device cuda --json $OUT/eval_$1.json > /dev/null 2> $OUT/eval_$1.err
  grep -E "^\[eval\].*right \(" $OUT/eval_$1.err | sed "s/\$/ codes $3/"
  grep -iE "error" $OUT/eval_$1.err | head -3
}
ev niah_codes2_512_2048 niah_single_text 2 512,2048 current
ev vt_codes2_2048 vt 2 2048 current
# the files come back compactly: the test logs in one archive
tar -C $OUT -czf $OUT/tests.tgz test_cuda_ops.txt test_cuda_engine.txt test_cuda_resid.txt test_cuda_graph.txt && \
  rm $OUT/test_cuda_*.txt
