#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the prefill attention kernel with warps of 32
# query vectors (OKV_PREFILL_WARP_ROWS=32: each K/V fragment from shared memory feeds
# twice the products) against warps of 16: the tests, the kernel alone (one 8B-shaped layer,
# a 2048-row chunk at the end of an 8K / 32K prompt), a whole 8B-shaped 2 x 32K prefill.
#   bash bench/gpu_run69.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
OKV_TEST_ONLY=prefill,attention timeout 200 build-gc/tests/test_cuda_ops > $OUT/ops_prefill.txt 2>&1
echo "ops (prefill, attention): exit $? $(grep -E 'checks' $OUT/ops_prefill.txt | tail -1)"
grep -E "FAIL" $OUT/ops_prefill.txt | head -5
for v in 128:16 128:32 256:32 64:16; do
  k=${v%%:*}; w=${v##*:}
  OKV_PREFILL_KERNEL=$k OKV_PREFILL_WARP_ROWS=$w timeout 60 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 \
    > $OUT/prefill_${k}_${w}.txt 2>&1
  echo "== tile $k warp rows $w"; grep "prefill kernel" $OUT/prefill_${k}_${w}.txt
done
T8B="-m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20 --max-num-batched-tokens 2048"
for v in 128:16 128:32 256:32; do
  k=${v%%:*}; w=${v##*:}
  echo "prefill 8B 2x32K, tile $k warp rows $w: $(OKV_PREFILL_KERNEL=$k OKV_PREFILL_WARP_ROWS=$w timeout 90 build-gc/oasiskv bench throughput $T8B 2>&1 | grep -E 'Throughput|rror' | head -2)"
done
timeout 200 build-gc/tests/test_cuda_ops > $OUT/ops.txt 2>&1; echo "ops (all): exit $? $(grep -E 'checks' $OUT/ops.txt | tail -1)"
grep -E "FAIL" $OUT/ops.txt | head -5
