#!/bin/bash
# GPU session of 2026-11-29 (12), one H200: serving A/B on a Llama-3-8B shape with 8K-token
# prompts, 256 output tokens, 16 GiB pool, concurrency 1 / 16 / 64, dense vs --kv-budget
# 2048, the prefill kernel on (OKV_PREFILL_KERNEL=1).
#   bash bench/gpu_run12.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs12; mkdir -p $L
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
OKV_PREFILL_KERNEL=1 OUT=$L/serve CTX=9216 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-570} bash bench/serve_ab.sh build-gc \
  "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 8192 256 "${CONCS:-1 16 64}" 2048 \
  "--device cuda" > $L/serve_8b_8k.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
tar cf $OUT/logs.tar -C $L .
cat $L/serve_8b_8k.md $L/serve/startup.txt
