#!/bin/bash
# GPU session of 2026-11-30 (10), one H200: the reasoning shape (the paper's 1.69x workload:
# short prompts, long generations, the KV growing during decode), trained target, English-text
# prompts of ~1K tokens, 2 GiB pool, dense and --kv-budget 2048 in the same call: c64 with
# 16384 output tokens, then c128 with 8192.
#   [SHAPES="C:OUT ..."] bash bench/gpu_run51.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs51; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
port=26000
for shape in ${SHAPES:-64:16384 128:8192}; do
  set -- ${shape/:/ }
  for kv in 2048 dense; do
    port=$((port + 100))
    TAG=reason_o$2 KVS=$kv PORT0=$port DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + $2 + 64)) PROMPTS_PER_SLOT=1 \
      timeout ${T_RUN:-150} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 $2 $1 2048 \
      "--device cuda" >> $L/serve.md 2>&1
    tail -1 $L/serve.md; save
  done
done
cat $L/serve/startup.txt
