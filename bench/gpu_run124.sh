#!/bin/bash
# GPU session of 2026-12-01 (19), one H200: the CUDA tests on the session's final tree, then sparse
# serving (budget 2048, serve defaults) of the trained target with padded row counts and without
# (OKV_PAD_ROWS=0), alternated: c64, 256 prompts of 6000 words and 256 output tokens, both +-50%.
#   bash bench/gpu_run124.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in cuda_graph cuda_engine cuda_ops sched dense_room cuda_resid prefix; do
  timeout 240 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt) at $SECONDS s"
done
grep -E "FAIL" $OUT/*.txt | head
for rep in 1 2; do
  for pad in 1 0; do
    OKV_PAD_ROWS=$pad OKV_CUDA_GRAPH_STATS=1 KVS=2048 PROMPTS_PER_SLOT=4 CTX=16384 BENCH_ARGS="--random-range-ratio 0.5" \
      TAG=target_pad${pad}_r$rep OUT=$OUT/serve bash bench/serve_ab.sh build-gc2 "-m train/checkpoints/run3/target --device cuda" \
      8 6000 256 "64" 2>&1 | grep "^| target" | tee -a $OUT/serve.md
    grep -h "graphs:" $OUT/serve/serve_target_pad${pad}_r${rep}_*.log | tee -a $OUT/serve.md
  done
  echo "rep $rep done at $SECONDS s"
  [ $SECONDS -gt 360 ] && break
done
