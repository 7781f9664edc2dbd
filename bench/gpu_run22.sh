#!/bin/bash
# GPU session of 2026-11-29 (6), one H200: the cache factor of the text-prompt serving run
# (trained target, c256, 2 GiB pool, --kv-budget 2048, 4096 output tokens, ~28.6K-token
# English prompts) after the candidate table: 2 (default SM sharing), 1.5 and 3.
#   bash bench/gpu_run22.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs22; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=18800
for cf in 2 1.5 3; do
  port=$((port + 100))
  TAG=text_cf$cf KVS=2048 PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
    timeout ${SERVE_S:-175} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
    "--device cuda --kv-cache-factor $cf" >> $L/serve_text_cf.md 2>&1
  pkill -f "oasiskv serve" 2>/dev/null; sleep 1
  tail -1 $L/serve_text_cf.md; save
done
grep -h "holds" $L/serve/serve_*.log
for f in $L/serve/metrics_*.txt; do echo "$f"; grep -h "oasiskv:\(fetch_bytes\|resident\|stall\|engine_steps\)" $f | grep -v "^#"; done
save
