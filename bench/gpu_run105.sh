#!/bin/bash
# GPU session of 2026-11-30 (16), one H200: gpu_run104 put the dense phase's extra time in kv_write
# (the fused kernel's writes through to the host tier on the compute stream: 0.160 -> 0.439 ms a step
# at 8B batch 1). The split path (device write on the compute stream, write-through on the copy
# stream) against the fused one (OKV_KVW_FUSED=0 / default): 8B batch 1 and 16 at 8K,
# trained target batch 1 and 16 at 9K; dense phase (--dense-while-room 1) and sparse, overlapped.
# OKV_KVW_FUSED was a temporary switch of that build (src/backend/cuda/cuda_kv.cu), removed after this
# run: no difference (bench/RESULTS.md section 23).
#   bash bench/gpu_run105.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
E="--config bench/configs/llama3-8b --device cuda --batch 1,16 --ctx 8192 --kv-budget dense,2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 3 --overlap 1"
T="-m train/checkpoints/run3/target --device cuda --batch 1,16 --ctx 9216 --kv-budget 2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 50 --warmup 5 --overlap 1"
for rep in 1; do
  for f in 1 0; do
    for r in 1 0; do
      echo "== rep $rep fused $f room $r" >> $OUT/kvw.md
      OKV_KVW_FUSED=$f timeout 60 build-gc2/bench/bench_step $E --dense-while-room $r 2>&1 | grep "^| [0-9]\|rror" >> $OUT/kvw.md
      OKV_KVW_FUSED=$f timeout 40 build-gc2/bench/bench_step $T --dense-while-room $r 2>&1 | grep "^| [0-9]\|rror" >> $OUT/kvw.md
    done
  done
done
cat $OUT/kvw.md | cut -c1-60
