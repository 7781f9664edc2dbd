#!/bin/bash
# GPU session of 2026-11-30 (8): where the sparse step's GPU time goes after this session's
# changes: OKV_CUDA_PROFILE=1 (per-op GPU and host time, graphs off) for the trained target
# at 28K, batch 128 and 1, budget 2048 and dense, and the SmolLM2 shape at 8K, batch 1.
#   bash bench/gpu_run37.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs37; mkdir -p $L
S="--cache-factor 2 --sticky 0.25 --steps 12 --warmup 3"
for b in 128 1; do for kv in 2048 dense; do
  OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b \
    --ctx 28672 --kv-budget $kv $S > $L/prof_trained_b${b}_$kv.txt 2>&1
  echo "== trained b$b $kv"; grep -A14 OKV_CUDA_PROFILE $L/prof_trained_b${b}_$kv.txt; grep '^| [0-9]' $L/prof_trained_b${b}_$kv.txt
done; done
OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step --config bench/configs/smollm2-135m --device cuda --batch 1 \
  --ctx 8192 --kv-budget 2048 $S > $L/prof_smol_b1_2048.txt 2>&1
echo "== smol b1 2048"; grep -A14 OKV_CUDA_PROFILE $L/prof_smol_b1_2048.txt
tar cf $OUT/logs.tar -C $L .
