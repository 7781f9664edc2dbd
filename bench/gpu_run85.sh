#!/bin/bash
# GPU session of 2026-11-30 (14), one H200: the Llama-3-8B shape (random weights, tokenizer padded
# to the model's 128256 ids) serving ~9.5K-token prompts with 1024 output tokens at c64 (section
# 14's row), 16 GiB device pool, 40 GiB host tier: budget 2048 with the fp8 host tier, budget 2048
# with the bf16 tier, dense.
#   bash bench/gpu_run85.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs85; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
port=29000
for v in "2048:--device cuda --kv-host-gb 40 --kv-host-dtype fp8:fp8" "2048:--device cuda --kv-host-gb 40:bf16" "dense:--device cuda:dense"; do
  kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
  port=$((port + 100))
  TAG=8b_8k_o1k_s14_$tag KVS=$kv PORT0=$port OUT=$L/serve CTX=11264 PROMPTS_PER_SLOT=1 timeout 170 bash bench/serve_ab.sh \
    build-gc "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 8192 1024 64 \
    2048 "$extra" >> $L/serve.md 2>&1
  echo "$tag: $(tail -1 $L/serve.md)"; save
done
for f in $L/serve/metrics_*; do
  echo "$(basename $f): fetched $(awk '/^oasiskv:fetch_bytes_total/ {print $2/1e9}' $f) GB, in time $(awk '/^oasiskv:resident_in_time_ratio/ {print $2}' $f), stall $(awk '/^oasiskv:stall_seconds_total/ {print $2}' $f) s"
done
cat $L/serve/startup.txt
