#!/bin/bash
# GPU session of 2026-12-01 (18), one H200. First the CUDA tests on d1a4507 (test_cuda_engine now
# also reads tests/data/models/qwen2_yarn; kv_write's neighbour check as it ran in session 17),
# then the one issue-4 point that missed its target (section 21: Llama-3-8B shape, random weights,
# 32K, batch 16, budget 2048, fp8 host tier: resident in time 0.031, the PCIe link carrying 1086 MiB
# a step): the same step with the device tier caching 2, 4, 8 and 12 times the selection (a pool of
# 8 to 48 GiB; random queries select a mostly new set each step, so the cache's size is what cuts
# the link's traffic), to find where the fetches fit behind compute.
#   bash bench/gpu_run112.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in cuda_ops cuda_engine dense_room cuda_graph cuda_resid prefix sched; do
  [ -x build-gc2/tests/test_$t ] || { echo "$t missing"; continue; }
  timeout 200 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt) at $SECONDS s"
done
grep -h "FAIL" $OUT/*.txt | head -8
S="--config bench/configs/llama3-8b --device cuda --steps 20 --warmup 5 --kv-host-dtype fp8 --sticky 0.25"
for cf in 2 4 8 12; do
  echo "== 32K b16 budget 2048 cache factor $cf" >> $OUT/step32k.md
  timeout 120 build-gc2/bench/bench_step $S --batch 16 --ctx 32768 --kv-budget 2048 --cache-factor $cf 2>&1 | grep -E "^\| [0-9]|rror" >> $OUT/step32k.md
  tail -1 $OUT/step32k.md; echo "cf $cf done at $SECONDS s"
  [ $SECONDS -gt 480 ] && break
done
