#!/bin/bash
# GPU session of 2026-12-02 (22), one H200: where the warp-specialised prefill kernel pays. Its
# whole-prefill gain was +14% on the 8B shape (2 x 32K) but -16% on SmolLM2's (16 x 8000) in
# gpu_run141, whose kernel-alone figures (the last chunk of an 8K/32K prompt) favoured it: the kernel
# alone at short contexts, forced (OKV_PREFILL_WS=2) against the two-warpgroup kernel (=0), and whole
# prefills with the default's threshold OKV_PREFILL_WS_MIN_KEYS at 0 .. never; test_cuda_ops.
#   bash bench/gpu_run142.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
mkdir -p $OUT/tests
timeout 150 $B/tests/test_cuda_ops > $OUT/tests/cuda_ops.txt 2>&1; echo "cuda_ops exit $? $(tail -1 $OUT/tests/cuda_ops.txt) at $SECONDS s"
grep -h "FAIL" $OUT/tests/*.txt | head -20
for shape in 9,3,64 32,8,128; do
  for w in 2 0; do
    echo "== shape $shape rows 512 OKV_PREFILL_WS=$w"
    OKV_PREFILL_WS=$w timeout 60 $B/bench/cuda_attention --prefill 512 --ctx 1024,2048,4096,8192 --shape $shape 2>&1 | grep -E "prefill kernel  |rror"
  done
done
tp() { echo "$1 MIN_KEYS=$2: $(OKV_PREFILL_WS_MIN_KEYS=$2 timeout 120 $B/oasiskv bench throughput --device cuda --output-len 1 "${@:3}" 2>&1 | grep -E 'Throughput|rror' | head -2)"; }
for mk in 0 2048 4096 8192 1000000000; do
  tp "prefill SmolLM2 shape 16x8000" $mk -m bench/configs/smollm2-135m --load-format dummy --num-prompts 16 --input-len 8000 --kv-pool-gb 20
  tp "prefill trained target (run 9) 16x28000" $mk -m train/checkpoints/run9/target --num-prompts 16 --input-len 28000 --kv-pool-gb 20
  tp "prefill 8B 2x32K chunk 512" $mk -m bench/configs/llama3-8b --load-format dummy --num-prompts 2 --input-len 32768 --kv-pool-gb 20
done
echo "done at $SECONDS s"
