#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the host-tier gather's CTAs against the compute it
# slows (section 18: a sparse step's matmuls take twice the dense step's GPU time while the
# gather runs): bench_step, trained target, serve defaults, OKV_FETCH_CTAS = default (by size,
# at most 32), 16, 8, 4, at the reasoning shape (9K context, batch 64 and 100) and the long
# text shape (28K, batch 83).
#   bash bench/gpu_run75.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for bc in 64:9216 100:9216 83:28672; do
  b=${bc%%:*}; ctx=${bc##*:}
  for f in "" 16 8 4; do
    echo "batch $b ctx $ctx OKV_FETCH_CTAS=${f:-default}: $(OKV_FETCH_CTAS=$f timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b --ctx $ctx --kv-budget 2048 --cache-factor 2 --sticky 0.25 --steps 30 --warmup 5 2>&1 | grep -E "^\| $b ")"
  done
done
