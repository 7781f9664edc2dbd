#!/bin/bash
# GPU session of 2026-11-30 (16), one H200: gpu_run103's profiles again without --overlap (the
# profiler runs steps synchronously): the 8B shape and the trained target at batch 1, dense against
# the dense phase of a sparse engine (--dense-while-room 1), OKV_CUDA_PROFILE=1 per op category.
#   bash bench/gpu_run104.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
T="-m train/checkpoints/run3/target --device cuda --batch 1 --ctx 9216 --kv-host-dtype fp8 --steps 50 --warmup 5 --dense-while-room 1"
E="--config bench/configs/llama3-8b --device cuda --batch 1 --ctx 8192 --kv-host-dtype fp8 --steps 20 --warmup 3 --dense-while-room 1"
for kv in dense 2048; do
  OKV_CUDA_PROFILE=1 timeout 60 build-gc2/bench/bench_step $T --kv-budget $kv > $OUT/prof_t_$kv.txt 2>&1
  OKV_CUDA_PROFILE=1 timeout 90 build-gc2/bench/bench_step $E --kv-budget $kv > $OUT/prof_8b_$kv.txt 2>&1
done
tail -n 25 $OUT/prof_8b_dense.txt $OUT/prof_8b_2048.txt
