#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the prefill default (tiles of 128 in warps of 32;
# tiles of 64 when a call has fewer tiles than SMs) against the session's start
# (OKV_PREFILL_WARP_ROWS=16: tiles of 128 in warps of 16): the kernel alone on three shapes,
# whole prefills through the engine (8B and SmolLM2 shapes, random weights), the tests.
#   bash bench/gpu_run71.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
OKV_TEST_ONLY=prefill timeout 100 build-gc/tests/test_cuda_ops > $OUT/ops_prefill.txt 2>&1; echo "ops prefill: exit $? $(tail -1 $OUT/ops_prefill.txt)"
timeout 150 build-gc/tests/test_cuda_engine > $OUT/engine.txt 2>&1; echo "engine: exit $? $(grep checks $OUT/engine.txt | tail -1)"
for sh in 32,8,128 9,3,64 4,2,64; do
  for w in "" 16; do
    echo "== shape $sh, OKV_PREFILL_WARP_ROWS=${w:-unset}"
    OKV_PREFILL_WARP_ROWS=$w timeout 60 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 --shape $sh 2>&1 | grep "kernel"
  done
done
for m in "llama3-8b 32768 2" "smollm2-135m 8000 16"; do
  set -- $m
  for w in "" 16; do
    echo "prefill $1 $3 x $2, OKV_PREFILL_WARP_ROWS=${w:-unset}: $(OKV_PREFILL_WARP_ROWS=$w timeout 90 build-gc/oasiskv bench throughput -m bench/configs/$1 --load-format dummy --device cuda --num-prompts $3 --input-len $2 --output-len 1 --kv-pool-gb 20 2>&1 | grep -E 'Throughput|rror' | head -2)"
  done
done
echo "prefill llama3-8b 2 x 32768, default, --max-num-batched-tokens 2048: $(timeout 90 build-gc/oasiskv bench throughput -m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20 --max-num-batched-tokens 2048 2>&1 | grep -E 'Throughput|rror' | head -2)"
for w in "" 16; do
  echo "prefill trained target 16 x 28000, OKV_PREFILL_WARP_ROWS=${w:-unset}: $(OKV_PREFILL_WARP_ROWS=$w timeout 90 build-gc/oasiskv bench throughput -m train/checkpoints/run3/target --device cuda --num-prompts 16 --input-len 28000 --output-len 1 --kv-pool-gb 20 2>&1 | grep -E 'Throughput|rror' | head -2)"
done
