#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: the long-text shape of sections 14/19 (~28.6K-token
# English prompts, 4096 output tokens, c256, 2 GiB pool, serve defaults) with overlapped decoding
# (the default now): budget 2048 with the fp8 host tier, and dense.
#   bash bench/gpu_run94.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs94; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=28000
for v in "2048:--device cuda --kv-host-dtype fp8:fp8_async" "dense:--device cuda:dense_async"; do
  kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
  port=$((port + 100))
  TAG=text_s15_$tag KVS=$kv PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
    timeout 240 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
    "$extra" >> $L/serve_text.md 2>&1
  echo "text c256 $tag: $(tail -1 $L/serve_text.md)"
  m=$(ls $L/serve/metrics_text_s15_${tag}_*c256.txt 2>/dev/null | head -1)
  [ -n "$m" ] && grep -E "^oasiskv:(steps_overlapped_total|engine_steps_total|resident_in_time_ratio|stall_seconds_total)" $m
done
cp $L/serve_text.md $OUT/
