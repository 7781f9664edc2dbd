#!/bin/bash
# Session 28 of 2026-12-03: `--predict layer-ahead` (and `oracle`) with the residency on the device:
# each layer's selection, installed at the previous layer's start, runs on the side stream
# (cuda_resid.cu) instead of a host round trip a layer. (1) test_cuda_engine (device vs host maps,
# now also layer-ahead and oracle) and test_cuda_resid; (2) the 8B-shaped decode step, current
# against layer-ahead, budget 2048, batch 1 / 4 / 16 at 8K and 32K; (3) chain at 32K, 2048, run 10,
# layer-ahead with device residency (host residency, gpu_run160: 16 of 40).
#   bash bench/gpu_run161.sh      (carry build-gc, made with bench/make_carry.sh)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
M=train/checkpoints/run10
for t in test_cuda_engine test_cuda_resid; do
  timeout 120 $B/tests/$t > $OUT/$t.txt 2>&1; echo "$t rc $?: $(tail -n 1 $OUT/$t.txt)"
done
grep "device vs host" $OUT/test_cuda_engine.txt | head -20
S="--config bench/configs/llama3-8b --device cuda --steps 20 --warmup 5 --batch 1,4,16 --ctx 8192,32768 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
timeout 100 $B/bench/bench_step $S --predict current 2>&1 | grep -E "^\| (batch|---)" | head -2
for p in current layer-ahead; do
  timeout 100 $B/bench/bench_step $S --predict $p 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-11 | sed "s/^/$p /" | tee -a $OUT/step.md
done
timeout 120 $B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2 --task chain --kv-budget 2048 --predict layer-ahead --json $OUT/LA_chain_dev.json 2>&1 | grep -E "^\| [a-z]|rror"
echo "done at $SECONDS s"
