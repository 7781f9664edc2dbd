#!/bin/bash
# Prepared for the next GPU session (one H200): the Llama-3-8B shape (random weights) served
# at concurrency 256 with ~9.2-9.7K-token prompts (8192 random words), 256 output tokens, 16 GiB pool, prefill kernel
# on; one server per call (KVS=dense, then KVS=2048), each about 4-8 minutes.
#   KVS=dense bash bench/gpu_run42.sh; KVS=2048 bash bench/gpu_run42.sh   (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs42; mkdir -p $L
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
KVS=${KVS:-dense} TAG=8b_8k_c256 OUT=$L/serve CTX=10240 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-570} bash bench/serve_ab.sh build-gc \
  "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 8192 256 256 2048 \
  "--device cuda" >> $L/serve_8b_8k_c256.md 2>&1
tar cf $OUT/logs.tar -C $L .
cat $L/serve_8b_8k_c256.md $L/serve/startup.txt
