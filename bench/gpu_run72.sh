#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: split keys for prefill calls with few tiles
# (OKV_PREFILL_SPLIT; by default when a call has at most one tile of 128 an SM): the tests,
# the kernel alone (default; OKV_PREFILL_SPLIT=1, no split; OKV_PREFILL_WARP_ROWS=16, the
# session's start) at 512- and 2048-row chunks on three shapes, whole prefills.
#   bash bench/gpu_run72.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine graph; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL" $OUT/ops.txt | head -5
run() {   # label, env..., then cuda_attention args
  local l=$1; shift
  echo "== $l"; env "$@" 2>&1 | grep "prefill kernel"
}
for sh in 32,8,128 9,3,64 4,2,64; do
  for r in 512 2048; do
    echo "#### shape $sh, $r-row chunk"
    run default timeout 60 build-gc/bench/cuda_attention --prefill $r --ctx 8192,32768 --shape $sh
    run "no split" OKV_PREFILL_SPLIT=1 timeout 60 build-gc/bench/cuda_attention --prefill $r --ctx 8192,32768 --shape $sh
    run "session start" OKV_PREFILL_WARP_ROWS=16 timeout 60 build-gc/bench/cuda_attention --prefill $r --ctx 8192,32768 --shape $sh
  done
done
T8B="-m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20"
for mb in 512 2048; do
  for e in "X=1" "OKV_PREFILL_WARP_ROWS=16"; do
    echo "prefill 8B 2x32K, chunk $mb, $e: $(env $e timeout 90 build-gc/oasiskv bench throughput $T8B --max-num-batched-tokens $mb 2>&1 | grep -E 'Throughput|rror' | head -2)"
  done
done
for e in "X=1" "OKV_PREFILL_WARP_ROWS=16"; do
  echo "prefill trained target 16 x 28000, $e: $(env $e timeout 90 build-gc/oasiskv bench throughput -m train/checkpoints/run3/target --device cuda --num-prompts 16 --input-len 28000 --output-len 1 --kv-pool-gb 20 2>&1 | grep -E 'Throughput|rror' | head -2)"
  echo "prefill smollm2 16 x 8000, $e: $(env $e timeout 90 build-gc/oasiskv bench throughput -m bench/configs/smollm2-135m --load-format dummy --device cuda --num-prompts 16 --input-len 8000 --output-len 1 --kv-pool-gb 20 2>&1 | grep -E 'Throughput|rror' | head -2)"
done
