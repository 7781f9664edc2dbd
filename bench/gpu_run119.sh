#!/bin/bash
# GPU session of 2026-12-01 (19), one H200: quest_coop_k (Quest's bound, the warp's summary loads
# coalesced through shared memory) against quest_lane_k (OKV_QUEST_COOP=0). test_cuda_ops (scores
# against the CPU backend's and the other kernels'; the selection call's timing, every kernel),
# then bench_step with each, alternated: 8B shape 32K batch 16 (cache factor 16, 150 warm-up
# steps: selection without fetches) and 8K batch 16 / 64 (serve defaults), trained target 28K
# batch 64 and 128.
#   bash bench/gpu_run119.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
timeout 200 build-gc2/tests/test_cuda_ops > $OUT/cuda_ops.txt 2>&1; echo "cuda_ops exit $? $(tail -1 $OUT/cuda_ops.txt) at $SECONDS s"
grep -E "FAIL|select perf|quest" $OUT/cuda_ops.txt | head -40
A="--config bench/configs/llama3-8b --device cuda --kv-host-dtype fp8 --sticky 0.25 --kv-budget 2048"
T="-m train/checkpoints/run3/target --device cuda --kv-host-dtype fp8 --sticky 0.25 --cache-factor 2 --kv-budget 2048 --ctx 28672 --batch 64,128 --steps 40 --warmup 10"
for rep in 1 2; do
  for co in 1 0; do
    echo "== rep $rep OKV_QUEST_COOP=$co" >> $OUT/step.md
    OKV_QUEST_COOP=$co timeout 90 build-gc2/bench/bench_step $A --batch 16 --ctx 32768 --cache-factor 16 --warmup 150 --steps 40 2>&1 | grep -E "^\| [0-9]|rror" >> $OUT/step.md
    OKV_QUEST_COOP=$co timeout 90 build-gc2/bench/bench_step $A --batch 16,64 --ctx 8192 --cache-factor 2 --warmup 10 --steps 30 2>&1 | grep -E "^\| [0-9]|rror" >> $OUT/step.md
    OKV_QUEST_COOP=$co timeout 90 build-gc2/bench/bench_step $T 2>&1 | grep -E "^\| [0-9]|rror" >> $OUT/step.md
    echo "rep $rep coop $co done at $SECONDS s"
  done
  [ $SECONDS -gt 380 ] && break
done
cut -c1-140 $OUT/step.md
