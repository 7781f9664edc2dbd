#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: stream priorities for the gathers. bench_step on the
# 8B shape at 8K (batch 4 and 16) and the trained target at 9K (batch 64), budget 2048, serve
# defaults (cache factor 2, sticky 0.25), fp8 host tier, with OKV_STREAM_PRIORITY=0 (all streams
# equal, the default) and =1 (copy and selection streams at the greatest priority), alternated twice.
# Then gpu_run89.sh's part 3 (sparse prefix caching on the 8B shape). The toggle made no difference
# (bench/RESULTS.md section 21) and was removed after this run: OKV_STREAM_PRIORITY is read no more.
#   bash bench/gpu_run90.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
for rep in 1 2; do for pr in 0 1; do
  OKV_STREAM_PRIORITY=$pr timeout 100 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 4,16 \
    --ctx 8192 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8 --steps 30 --warmup 5 > $OUT/p${pr}_r${rep}_8b.txt 2>&1
  OKV_STREAM_PRIORITY=$pr timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 64 \
    --ctx 9216 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8 --steps 50 --warmup 5 > $OUT/p${pr}_r${rep}_tr.txt 2>&1
  echo "== priority $pr rep $rep"; grep -h "^| [0-9]" $OUT/p${pr}_r${rep}_8b.txt $OUT/p${pr}_r${rep}_tr.txt
done; done
PARTS=3 bash bench/gpu_run89.sh
