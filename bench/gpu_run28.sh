#!/bin/bash
# GPU session of 2026-11-29 (7), one H200: the English-text serving rows at c256 with segment
# graphs (cuda_graph.cu, on by default) and the serve defaults (--kv-cache-factor 2,
# --kv-sticky 0.25): trained target, 2 GiB pool, --kv-budget 2048 vs dense, 4096 output tokens.
#   bash bench/gpu_run28.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs28; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=22000
for kv in 2048 dense; do
  port=$((port + 100))
  TAG=text_graphs KVS=$kv PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
    timeout ${SERVE_S:-170} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
    "--device cuda" >> $L/serve.md 2>&1
  pkill -f "oasiskv serve" 2>/dev/null; sleep 1
  tail -1 $L/serve.md; save
done
for f in $L/serve/metrics_*.txt; do echo "$f"; grep -h "oasiskv:\(fetch_bytes\|resident\|stall\|engine_steps\)" $f | grep -v "^#"; done
save
