#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: dense rows of the reasoning shape (c64 and c128 x
# 16384, 2 GiB pool, serve defaults) in the same session as gpu_run64's sparse rows.
#   bash bench/gpu_run65.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs65; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
for c in 64 128; do
  TAG=reason_o16384 KVS=dense PORT0=$((27600 + c)) DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
    PROMPTS_PER_SLOT=1 timeout 230 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 $c \
    2048 "--device cuda" >> $L/serve.md 2>&1
  tail -1 $L/serve.md
done
tar cf $OUT/logs.tar -C $L .
