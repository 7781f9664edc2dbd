#!/bin/bash
# GPU session of 2026-11-30 (14), one H200: with the fp8 host tier each gather load carries twice
# the elements, so fewer loads in flight may keep the bandwidth and contend less (section 19):
# bench_step of the trained target with --kv-host-dtype fp8 at 9K (batch 64, 100) and 28K (batch
# 83), serve defaults, for the default gather (2 loads in flight a thread, up to 32 CTAs),
# OKV_GATHER_UNROLL=1 and 4, and OKV_FETCH_CTAS=16; two alternating repetitions.
#   bash bench/gpu_run87.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for rep in 1 2; do
  for bc in 64:9216 100:9216 83:28672; do
    b=${bc%%:*}; ctx=${bc##*:}
    for v in X=1 OKV_GATHER_UNROLL=1 OKV_GATHER_UNROLL=4 OKV_FETCH_CTAS=16; do
      echo "rep $rep b$b ctx $ctx $v: $(env $v timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b --ctx $ctx --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8 --steps 40 --warmup 5 2>&1 | grep -E "^\| $b " | cut -d'|' -f5,10,11)"
    done
  done
done
