#!/bin/bash
# GPU session of 2026-11-30 (14), one H200: the FP8 E4M3 host tier (--kv-host-dtype fp8).
# The CUDA tests (test_cuda_ops with the e4m3 tables, an fp8 pass of its KV test and fp8 on half
# its attention configurations; test_cuda_engine with fp8 runs; resid; graph), then bench_step
# of the trained target at the reasoning shape (9K, batch 64 and 100) and the long-text shape
# (28K, batch 83), serve defaults, bf16 host tier against fp8, and the 8B shape at batch 4 / 16.
#   bash bench/gpu_run82.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine resid graph; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL" $OUT/*.txt | head -8
grep -E "e4m3|fp8" $OUT/ops.txt $OUT/engine.txt | head -12
for bc in 64:9216 100:9216 83:28672; do
  b=${bc%%:*}; ctx=${bc##*:}
  for h in auto fp8; do
    echo "trained b$b ctx $ctx host $h: $(timeout 80 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b --ctx $ctx --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype $h --steps 30 --warmup 5 2>&1 | grep -E "^\| $b ")"
  done
done
for h in auto fp8; do
  echo "== 8B host $h"
  timeout 150 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 4,16 --ctx 8192 \
    --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype $h --steps 10 --warmup 3 2>&1 | grep -E "^\| (4|16) "
done
