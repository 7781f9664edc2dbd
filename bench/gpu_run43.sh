#!/bin/bash
# GPU session of 2026-11-30 (9), one H200, with the new defaults (gather unroll 2, selection
# stream on): (1) the trained target's English-text serving row at c256, --kv-budget 2048
# (dense is unchanged by these defaults: gpu_run36 measured it), ~28.6K-token prompts, 2 GiB
# pool, 4096 output tokens; (2) the Llama-3-8B shape (random weights) at c64 with 8192-word
# prompts (~9.5K tokens) and 1024 output tokens, 16 GiB pool, dense vs 2048 (a decode-heavier
# mix than gpu_run42's 256 output tokens, whose time is ~90% prefill); (3) the text row at c1.
#   bash bench/gpu_run43.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs43; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
TAG=text_s9 KVS=2048 PORT0=23100 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout 170 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
  "--device cuda" >> $L/serve.md 2>&1
tail -1 $L/serve.md; save
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
for kv in dense 2048; do
  TAG=8b_8k_o1k KVS=$kv PORT0=$([ $kv = dense ] && echo 23200 || echo 23300) OUT=$L/serve CTX=11264 PROMPTS_PER_SLOT=1 \
    timeout 150 bash bench/serve_ab.sh build-gc \
    "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 8192 1024 64 2048 \
    "--device cuda" >> $L/serve.md 2>&1
  tail -1 $L/serve.md; save
done
TAG=text_s9 KVS=2048 PORT0=23400 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout 70 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 1 2048 \
  "--device cuda" >> $L/serve.md 2>&1
tail -1 $L/serve.md; save
