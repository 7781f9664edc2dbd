#!/bin/bash
# GPU session of 2026-11-30 (8), last device minutes: does a gather with fewer loads in
# flight per thread slow compute less for the same rate? bench_step of the trained target,
# 28K, batch 128, budget 2048 (serve defaults), graphs on, for OKV_GATHER_UNROLL x
# OKV_FETCH_CTAS; then, if one beats the default (4 x 32) by 5%, the English-text c256 sparse
# serving row with it (against gpu_run36's 13294 tok/s).
#   bash bench/gpu_run40.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs40; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
S="-m train/checkpoints/run3/target --device cuda --batch 128 --ctx 28672 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 5"
best=""; best_ms=999
for cfg in 4x32 1x32 2x32 1x64 2x64 8x16 1x128 4x32; do
  u=${cfg%x*}; fc=${cfg#*x}
  OKV_GATHER_UNROLL=$u OKV_FETCH_CTAS=$fc timeout 40 build-gc/bench/bench_step $S > $L/step_u${u}_c$fc.txt 2>&1
  row=$(grep '^| 128 |' $L/step_u${u}_c$fc.txt); ms=$(echo "$row" | awk -F'|' '{print $5}' | tr -d ' ')
  echo "unroll $u ctas $fc: $row" | tee -a $L/sweep.txt
  [ -n "$ms" ] && awk "BEGIN{exit !($ms < $best_ms)}" && { best_ms=$ms; best=$cfg; }
done
def=$(grep '^unroll 4 ctas 32' $L/sweep.txt | tail -1 | awk -F'|' '{print $5}' | tr -d ' ')
echo "best $best $best_ms ms (default $def)"; save
if [ "$best" != "4x32" ] && awk "BEGIN{exit !($best_ms < 0.95 * $def)}"; then
  u=${best%x*}; fc=${best#*x}
  bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl > /dev/null
  OKV_GATHER_UNROLL=$u OKV_FETCH_CTAS=$fc TAG=text_u${u}_c$fc KVS=2048 PORT0=24000 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve \
    CTX=32768 PROMPTS_PER_SLOT=1 timeout 170 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
    "--device cuda" >> $L/serve.md 2>&1
  tail -1 $L/serve.md
fi
save
