#!/bin/bash
# Prepared for the next GPU session (one H200); not yet run. What the key codes cost a server:
# gpu_run51's reasoning shape (trained target, ~1K-token English prompts, 16384 output tokens,
# c64, 2 GiB pool) with --kv-budget 2048 --kv-key-codes 2 (the default blend), to set beside
# session 10's rows of the same shape: sparse 31955 output tok/s (64 running), dense 23409 (30).
# The codes add 1/16 of the KV to each request's device need and ~3x the selection time.
#   bash bench/gpu_run57.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs57; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
TAG=reason_codes2_o16384 KVS=2048 PORT0=27000 DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
  PROMPTS_PER_SLOT=1 timeout ${T_RUN:-200} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 64 \
  2048 "--device cuda --kv-key-codes 2" >> $L/serve.md 2>&1
tail -1 $L/serve.md
tar cf $OUT/logs.tar -C $L .
