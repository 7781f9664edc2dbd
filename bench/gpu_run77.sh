#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the warpgroup-MMA prefill kernel (OKV_PREFILL_WGMMA=1,
# cuda_prefill_wg.cu) against the default: test_cuda_ops' prefill test (seven variants against
# the CPU), then the kernel alone on the 8B and trained-target shapes.
#   bash bench/gpu_run77.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
OKV_TEST_ONLY=prefill timeout 120 build-gc/tests/test_cuda_ops > $OUT/ops_prefill.txt 2>&1
echo "ops prefill: exit $? $(tail -1 $OUT/ops_prefill.txt)"
grep -E "FAIL|WGMMA" $OUT/ops_prefill.txt | head -20
for sh in 32,8,128 4,2,64; do
  for r in 512 2048; do
    for e in X=1 OKV_PREFILL_WGMMA=1; do
      echo "== $sh rows $r $e"; env $e timeout 60 build-gc/bench/cuda_attention --prefill $r --ctx 8192,32768 --shape $sh 2>&1 | grep "prefill kernel"
    done
  done
done
