#!/bin/bash
# GPU session of 2026-11-30 (9), one H200: the trained target's English-text serving rows at
# c16, c64 and c1, dense and --kv-budget 2048 (new defaults), ~28.6K-token prompts, 2 GiB pool,
# 4096 output tokens, one prompt per slot.
#   bash bench/gpu_run46.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs46; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=26000
for c in 16 64 1; do
  for kv in 2048 dense; do
    port=$((port + 100))
    TAG=text_s9c KVS=$kv PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
      timeout 70 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 $c 2048 \
      "--device cuda" >> $L/serve.md 2>&1
    tail -1 $L/serve.md; save
  done
done
