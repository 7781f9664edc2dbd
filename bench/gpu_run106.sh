#!/bin/bash
# GPU session of 2026-11-30 (16), one H200: the Llama-3-8B shape at 32K (36766-37019-token prompts,
# CTX=37376), concurrency 16, 256 output tokens, 16 GiB pool: dense and budget 2048 with the fp8 host
# tier (serve's defaults: dense while room). Section 8 measured this row on the build of 2026-11-29.
#   bash bench/gpu_run106.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
L=/tmp/okv_logs106; mkdir -p $L
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
M="-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json"
for kv in dense 2048; do
  TAG=32k KVS=$kv PORT0=$((30000 + ${#kv})) OUT=$L/serve CTX=37376 PROMPTS_PER_SLOT=1 timeout 105 bash bench/serve_ab.sh build-gc2 \
    "$M" 16 32768 256 16 2048 "--device cuda --kv-host-dtype fp8" >> $L/serve_8b_32k.md 2>&1
  echo "$kv: $(tail -1 $L/serve_8b_32k.md)"
done
for m in $L/serve/metrics_32k_*; do echo "$m: $(grep -E '^oasiskv:(sparse_demotions_total|blocks_fetched_total|resident_in_time_ratio)|^vllm:num_preemptions' $m | tr '\n' ' ')"; done
cat $L/serve/startup.txt
cp $L/serve_8b_32k.md $OUT/
