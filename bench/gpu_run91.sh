#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: the Llama-3-8B-shape decode step (random weights)
# at the batches and contexts, dense and budget 2048 with the serve defaults (cache
# factor 2, sticky 0.25), fp8 and bf16 host tiers: step time, roofline, fetched bytes, resident
# in time, stall, and the host's own work against its blocked time.
#   bash bench/gpu_run91.sh      (carry build-gc; results in $OUT/step8b.md)
set -u
. bench/gpu_env.sh build-gc
S="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5"
SP="--kv-budget 2048 --cache-factor 2 --sticky 0.25"
run() { echo "== $*" >> $OUT/step8b.md; timeout 150 build-gc/bench/bench_step $S "$@" 2>&1 | grep -E "^\| [0-9]|rror" >> $OUT/step8b.md; tail -n +1 $OUT/step8b.md | tail -4; }
run --batch 1,16,64 --ctx 8192 --kv-budget dense
run --batch 1,16 --ctx 32768 --kv-budget dense
run --batch 1,16,64 --ctx 8192 $SP --kv-host-dtype fp8
run --batch 128 --ctx 8192 $SP --kv-host-dtype fp8
run --batch 1,16 --ctx 32768 $SP --kv-host-dtype fp8
run --batch 32 --ctx 32768 $SP --kv-host-dtype fp8
run --batch 16,64 --ctx 8192 $SP
run --batch 16 --ctx 32768 $SP
