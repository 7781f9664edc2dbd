#!/bin/bash
# GPU session of 2026-11-30 (8), call 3: the sparse step's host trims (per layer at batch 1:
# a decode-shaped kv_write as one kernel with the summary and the write-through, no copy-
# stream round trip; the residency item table in the select requests' upload; the
# selection placeholders uploaded only when they change; the gather resets its own count)
# through the CUDA tests, bench_step against gpu_run34 (same shapes), then the accuracy of
# the trained target at 32K, N = 100, niah_single_text, dense vs budget 2048 (serve defaults).
#   bash bench/gpu_run35.sh      (carry build-gc; results under $OUT: logs.tar, eval32k.json)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs35; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_ops test_cuda_resid test_cuda_engine test_cuda_graph test_cuda_tp; do
  timeout 150 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -hE "^FAIL" $L/*.txt | head
grep -h "decode-shaped" $L/test_cuda_ops.txt | head -3
save
S="--cache-factor 2 --sticky 0.25 --steps 20 --warmup 5"
timeout 90 build-gc/bench/bench_step --config bench/configs/smollm2-135m --device cuda --batch 1,4,16 \
  --ctx 8192 --kv-budget dense,2048 $S > $L/step_smol.txt 2>&1
timeout 90 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 1,4,16,128 \
  --ctx 28672 --kv-budget dense,2048 $S > $L/step_trained.txt 2>&1
timeout 120 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 1,4 \
  --ctx 8192 --kv-budget dense,2048 $S > $L/step_8b.txt 2>&1
for f in smol trained 8b; do echo "== $f"; grep "^| [0-9]" $L/step_$f.txt; done
save
timeout ${EVAL_S:-280} build-gc/oasiskv eval --sweep --task niah_single_text --model train/checkpoints/run3/target \
  --context-len 32768 --num-samples 100 --kv-budget dense,2048 --predict current --kv-cache-factor 2 --kv-sticky 0.25 \
  --seed 0 --device cuda --json $OUT/eval32k.json > $L/eval32k.txt 2> $L/eval32k.err
echo "eval: exit $?"; tail -8 $L/eval32k.txt; tail -2 $L/eval32k.err
save
