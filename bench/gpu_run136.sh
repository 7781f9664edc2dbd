#!/bin/bash
# GPU session of 2026-12-02 (22), one H200: the warp-specialised prefill kernel
# (cuda_prefill_ws.cu). The CUDA tests on the new tree (test_cuda_ops runs the prefill
# variants against the CPU, the new kernel among them), then the prefill kernel alone
# (8B, SmolLM2 and trained-target shapes, chunks of 512 and 2048 rows at the end of 8K and 32K
# prompts), the new kernel against OKV_PREFILL_WS=0 (the two-warpgroup wgmma kernel), and the
# whole 8B-shaped 2 x 32K prefill both ways.
#   bash bench/gpu_run136.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p $OUT/tests
for t in cuda_ops cuda_graph cuda_engine sched dense_room cuda_resid prefix; do
  timeout 150 $B/tests/test_$t > $OUT/tests/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/tests/$t.txt) at $SECONDS s"
done
grep -h "FAIL" $OUT/tests/*.txt | head -20
for shape in 32,8,128 9,3,64 4,2,64; do
  for rows in 512 2048; do
    for e in X=1 OKV_PREFILL_WS=0; do
      echo "== shape $shape rows $rows $e"
      env $e timeout 60 $B/bench/cuda_attention --prefill $rows --ctx 8192,32768 --shape $shape 2>&1 | grep -E "prefill kernel|rror"
    done
  done
done
for e in X=1 OKV_PREFILL_WS=0; do
  echo "prefill 8B 2x32K chunk 512 $e: $(env $e timeout 90 $B/oasiskv bench throughput -m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20 2>&1 | grep -E 'Throughput|rror' | head -2)"
  echo "prefill 8B 2x32K chunk 2048 $e: $(env $e timeout 90 $B/oasiskv bench throughput -m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20 --max-num-batched-tokens 2048 2>&1 | grep -E 'Throughput|rror' | head -2)"
done
echo "done at $SECONDS s"
