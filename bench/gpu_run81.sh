#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the prefill kernels after sharing the online
# softmax (pf_softmax) and the wgmma kernel's span / block-meta helpers (cuda_prefill.cuh):
# the CUDA tests and the kernel's speed, default (wgmma) and OKV_PREFILL_WGMMA=0.
#   bash bench/gpu_run81.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine graph; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL" $OUT/ops.txt | head -5
for e in X=1 OKV_PREFILL_WGMMA=0; do
  echo "== $e"; env $e timeout 60 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 2>&1 | grep "prefill kernel"
done
echo "prefill 8B 2x32K chunk 512: $(timeout 90 build-gc/oasiskv bench throughput -m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20 2>&1 | grep -E 'Throughput|rror' | head -2)"
