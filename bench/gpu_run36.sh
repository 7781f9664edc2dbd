#!/bin/bash
# GPU session of 2026-11-30 (8), one H200: the English-text serving rows again with this
# session's step changes (GEMV path and fusions, the sparse step's host trims): trained
# target, ~28.6K-token prompts, 2 GiB pool, 4096 output tokens, serve defaults; c256 then c1,
# --kv-budget 2048 vs dense (as gpu_run28 / gpu_run31 of session 7).
#   bash bench/gpu_run36.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs36; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=23000
for c in 256 1; do
  for kv in 2048 dense; do
    port=$((port + 100))
    TAG=text_s8 KVS=$kv PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
      timeout $([ $c = 1 ] && echo 70 || echo 170) bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 $c 2048 \
      "--device cuda" >> $L/serve.md 2>&1
    tail -1 $L/serve.md; save
  done
done
save
