#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the warpgroup-MMA prefill kernel at two CTAs an SM,
# now the default on 9.0 devices: the CUDA tests on it, the kernel alone and the whole 8B /
# trained-target prefills against OKV_PREFILL_WGMMA=0 (the mma.sync kernel of gpu_run72).
#   bash bench/gpu_run78.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for sh in 32,8,128 4,2,64; do
  for r in 512 2048; do
    for e in X=1 OKV_PREFILL_WGMMA=0; do
      echo "== $sh rows $r $e"; env $e timeout 60 build-gc/bench/cuda_attention --prefill $r --ctx 8192,32768 --shape $sh 2>&1 | grep "prefill kernel"
    done
  done
done
for t in ops engine graph; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL" $OUT/ops.txt | head -5
T8B="-m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20"
for e in X=1 OKV_PREFILL_WGMMA=0; do
  echo "prefill 8B 2x32K chunk 512, $e: $(env $e timeout 90 build-gc/oasiskv bench throughput $T8B 2>&1 | grep -E 'Throughput|rror' | head -2)"
  echo "prefill trained target 16 x 28000, $e: $(env $e timeout 90 build-gc/oasiskv bench throughput -m train/checkpoints/run3/target --device cuda --num-prompts 16 --input-len 28000 --output-len 1 --kv-pool-gb 20 2>&1 | grep -E 'Throughput|rror' | head -2)"
done
