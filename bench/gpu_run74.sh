#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: where a sparse decode step of the reasoning shape
# goes (trained target, batch 64 and 100, ~9K context = mid-generation of 1K + 16K, budget 2048,
# serve defaults): OKV_CUDA_PROFILE per op category (graphs off under it) and plain timing.
#   bash bench/gpu_run74.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for b in 64 100; do
  for kv in dense 2048; do
    A="-m train/checkpoints/run3/target --device cuda --batch $b --ctx 9216 --kv-budget $kv --cache-factor 2 --sticky 0.25 --steps 20 --warmup 5"
    timeout 60 build-gc/bench/bench_step $A > $OUT/step_b${b}_$kv.txt 2>&1
    echo "== batch $b $kv"; grep -E "^\| $b " $OUT/step_b${b}_$kv.txt
    OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step $A > $OUT/prof_b${b}_$kv.txt 2>&1
    tail -14 $OUT/prof_b${b}_$kv.txt
  done
done
command -v nsys && echo "nsys present"
