#!/bin/bash
# GPU session of 2026-11-30 (16), one H200: (1) the CUDA tests on the tidy of 1c54042 (one embed
# path per backend) and the scheduler changes after gpu_run97: test_cuda_ops, test_cuda_engine,
# test_cuda_graph, test_cuda_resid, test_prefix, test_sched; (2) bench_step --overlap 0 against 1
# (trained target batch 1 and 64 at 9K; 8B shape batch 1 and 16 at 8K), dense and budget 2048.
#   bash bench/gpu_run98.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
for t in cuda_ops cuda_engine cuda_graph cuda_resid prefix sched; do
  timeout 200 build-gc/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
grep -h "FAIL\|queued step failed" $OUT/*.txt | head -8
for ov in 0 1; do
  timeout 100 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 1,64 --ctx 9216 \
    --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --steps 50 --warmup 5 --overlap $ov > $OUT/step_trained_ov$ov.txt 2>&1
  echo "trained overlap $ov"; grep "^| [0-9]\|rror" $OUT/step_trained_ov$ov.txt
done
for ov in 0 1; do
  timeout 150 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 1,16 --ctx 8192 \
    --kv-budget dense,2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 3 --overlap $ov \
    > $OUT/step_8b_ov$ov.txt 2>&1
  echo "8b overlap $ov"; grep "^| [0-9]\|rror" $OUT/step_8b_ov$ov.txt
done
