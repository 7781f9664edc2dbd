#!/bin/bash
# GPU session of 2026-12-02 (22), one H200: the final tree of the warp-specialised prefill kernel
# (TMA producer warp, consumers taking turns by default, softmax in four parts): every CUDA test,
# compute-sanitizer memcheck on the prefill test, the kernel alone on three shapes (default, =1
# without turns, =0 the two-warpgroup kernel), and whole prefills (8B shape 2 x 32K, chunks of
# 512 and 2048; the trained target 16 x 28000; SmolLM2's shape 16 x 8000), default against =0.
# Then the evaluation planned in session 21 (gpu_run135.sh, not run there): see below.
#   bash bench/gpu_run141.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p $OUT/tests
for t in cuda_ops cuda_graph cuda_engine sched dense_room cuda_resid prefix; do
  timeout 150 $B/tests/test_$t > $OUT/tests/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/tests/$t.txt) at $SECONDS s"
done
grep -h "FAIL" $OUT/tests/*.txt | head -20
OKV_TEST_ONLY=prefill timeout 150 compute-sanitizer --tool memcheck --leak-check no $B/tests/test_cuda_ops > $OUT/tests/memcheck_prefill.txt 2>&1
echo "memcheck prefill exit $? $(grep -E 'ERROR SUMMARY' $OUT/tests/memcheck_prefill.txt) $(tail -1 $OUT/tests/memcheck_prefill.txt) at $SECONDS s"
for shape in 32,8,128 9,3,64 4,2,64; do
  for rows in 512 2048; do
    for w in 2 1 0; do
      echo "== shape $shape rows $rows OKV_PREFILL_WS=$w"
      OKV_PREFILL_WS=$w timeout 60 $B/bench/cuda_attention --prefill $rows --ctx 8192,32768 --shape $shape 2>&1 | grep -E "prefill kernel  |rror"
    done
  done
done
tp() { echo "$1 WS=$2: $(OKV_PREFILL_WS=$2 timeout 120 $B/oasiskv bench throughput --device cuda --output-len 1 "${@:3}" 2>&1 | grep -E 'Throughput|rror' | head -2)"; }
for w in 2 0; do
  tp "prefill 8B 2x32K chunk 512" $w -m bench/configs/llama3-8b --load-format dummy --num-prompts 2 --input-len 32768 --kv-pool-gb 20
  tp "prefill 8B 2x32K chunk 2048" $w -m bench/configs/llama3-8b --load-format dummy --num-prompts 2 --input-len 32768 --kv-pool-gb 20 --max-num-batched-tokens 2048
  tp "prefill trained target (run 9) 16x28000" $w -m train/checkpoints/run9/target --num-prompts 16 --input-len 28000 --kv-pool-gb 20
  tp "prefill SmolLM2 shape 16x8000" $w -m bench/configs/smollm2-135m --load-format dummy --num-prompts 16 --input-len 8000 --kv-pool-gb 20
done
echo "done at $SECONDS s"
# issue 6 (planned in session 21 as gpu_run135): run 9's target on chain with tables that fill the
# context (the 16K/32K chain cells before session 21 were 12.2K-token prompts), dense, Quest's bound
# and 2-bit key codes at 1024 and 2048, N = 40; chain_long (128 lookups) dense at 8K, N = 20
M=train/checkpoints/run9/target
E="$B/oasiskv eval --sweep --model $M --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --predict current"
run() { local left=$((420 - SECONDS)); [ $left -gt 20 ] || { echo "skipped $1: no time"; return; }
  echo "== $1 ($left s left)"; timeout $left $E --json $OUT/$1.json "${@:2}" 2>&1 | grep "^| [a-z]"; }
run r9_chain_filled --task chain --context-len 16384,32768 --kv-budget dense,1024,2048
run r9_chain_filled_codes --task chain --context-len 16384,32768 --kv-budget 1024,2048 --kv-key-codes 2
run r9_chain_long --task chain_long --context-len 8192 --kv-budget dense --num-samples 20
echo "all done at $SECONDS s"
