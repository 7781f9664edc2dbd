#!/bin/bash
# Planned in session 27 of 2026-12-03 (not run: the session's device time was spent): `--predict layer-ahead`
# on the H200. (1) the CUDA engine test; (2) its accuracy at 32K, run 10, 2-bit key codes, serve defaults,
# N = 40, at 512 / 1024 / 2048 on the seven families (beside gpu_run159's current / oracle / lookahead
# cells: ACCURACY.md, "The whole budget axis"); (3) the 8B-shaped decode step, current against
# layer-ahead, budget 2048, batch 1 and 4 at 8K and 32K (step ms, resident in time, stall). The mode keeps
# the residency on the host, so each layer's selection is a host round trip: expect (3) to show that cost.
#   bash bench/gpu_run160.sh      (carry build-gc, made with bench/make_carry.sh; END=seconds, default 560)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
M=train/checkpoints/run10
END=${END:-560}
timeout 60 $B/tests/test_cuda_engine > /tmp/t.txt 2>&1; echo "test_cuda_engine rc $?: $(tail -n 1 /tmp/t.txt)"
# the GPU against the CPU's 4K cell (chain, 256, layer-ahead: 12 of 16 on the CPU, bench/results/cpu_s27)
timeout 90 $B/oasiskv eval --sweep --model $M/target --context-len 4096 --num-samples 16 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --kv-key-codes 2 --task chain --kv-budget 256 --predict current,layer-ahead --device cuda 2>&1 | grep -E "^\| [a-z]|rror"
S="--config bench/configs/llama3-8b --device cuda --steps 20 --warmup 5 --batch 1,4 --ctx 8192,32768 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
for p in current layer-ahead; do
  timeout 90 $B/bench/bench_step $S --predict $p 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-11 | sed "s/^/$p /" | tee -a $OUT/step.md
done
E="$B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2"
mkdir -p $OUT/m
for t in chain niah_multiquery niah_multikey vt qa niah_single_text niah_multivalue; do
  left=$((END - SECONDS)); [ $left -gt 30 ] || { echo "skipped $t: no time"; continue; }
  timeout $left $E --json $OUT/m/LA_$t.json --task $t --kv-budget 512,1024,2048 --predict layer-ahead 2>&1 | grep "^| [a-z]"
done
tar -C $OUT -czf $OUT/la.tgz m && rm -rf $OUT/m
echo "done at $SECONDS s"
