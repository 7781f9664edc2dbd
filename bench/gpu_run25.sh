#!/bin/bash
# Prepared for the next GPU session (one H200); not yet run. The headline serving rows with
# the session-6 build (candidate table, lists' version, serve default --kv-cache-factor 2):
# trained target, 2 GiB pool, --kv-budget 2048, 4096 output tokens, dense and
# sparse (CONCS, default 256; one call holds one concurrency), (a) random 24000-word prompts (~28K tokens), (b) English-text prompts (~28.6K tokens,
# niah_single_text samples). About 9 minutes; SERVE_S bounds each run.
#   bash bench/gpu_run25.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs25; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=20000
for c in ${CONCS:-256}; do
  for ds in text random; do
    for kv in 2048 dense; do
      port=$((port + 100))
      d=""; [ $ds = text ] && d=/tmp/text28k_prompts.jsonl
      TAG=$ds KVS=$kv PORT0=$port DATASET=$d OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
        timeout ${SERVE_S:-150} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 $c 2048 \
        "--device cuda" >> $L/serve.md 2>&1
      pkill -f "oasiskv serve" 2>/dev/null; sleep 1
      tail -1 $L/serve.md; save
    done
  done
done
