#!/bin/bash
# GPU session of 2026-12-02 (22), one H200: the warp-specialised prefill kernel with its producer
# software-pipelined (block tables read a chunk ahead, copies signalled a chunk later), with and
# without the consumers taking turns (OKV_PREFILL_WS=2 / 1), against the two-warpgroup kernel
# (OKV_PREFILL_WS=0): test_cuda_ops, the kernel alone on three shapes, the 8B-shaped 2 x 32K prefill.
#   bash bench/gpu_run137.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
mkdir -p $OUT/tests
for t in cuda_ops; do
  timeout 150 $B/tests/test_$t > $OUT/tests/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/tests/$t.txt) at $SECONDS s"
done
grep -h "FAIL" $OUT/tests/*.txt | head -20
for shape in 32,8,128 9,3,64 4,2,64; do
  for rows in 512 2048; do
    for w in 1 2 0; do
      echo "== shape $shape rows $rows OKV_PREFILL_WS=$w"
      OKV_PREFILL_WS=$w timeout 60 $B/bench/cuda_attention --prefill $rows --ctx 8192,32768 --shape $shape 2>&1 | grep -E "prefill kernel  |rror"
    done
  done
done
for w in 1 2 0; do
  for c in 512 2048; do
  echo "prefill 8B 2x32K chunk $c WS=$w: $(OKV_PREFILL_WS=$w timeout 90 $B/oasiskv bench throughput -m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20 --max-num-batched-tokens $c 2>&1 | grep -E 'Throughput|rror' | head -2)"
  done
done
echo "done at $SECONDS s"
