#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the Llama-3-8B-shaped decode step (random weights)
# with the current build: step time, fetched MiB, resident-in-time share and stall per step at
# batch 1, 4, 16 and 8K / 32K, dense and budget 2048 (serve defaults: cache factor 2, sticky 0.25).
#   bash bench/gpu_run76.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
timeout 250 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 1,4,16 --ctx 8192,32768 \
  --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --steps 10 --warmup 3 > $OUT/step_8b.txt 2>&1
echo "exit $?"; grep -E "^\|" $OUT/step_8b.txt
# where the batch-1 / batch-4 dense step's time goes (graphs off under the profiler)
for b in 1 4; do
  OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch $b --ctx 8192 \
    --kv-budget dense --steps 10 --warmup 3 > $OUT/prof_8b_b${b}.txt 2>&1
  echo "== 8B batch $b 8K dense, profiled"; tail -13 $OUT/prof_8b_b${b}.txt
done
# the GEMV alone against the copy ceiling: bench_membw if it runs on the device
ls build-gc/bench/ | tr '\n' ' '
