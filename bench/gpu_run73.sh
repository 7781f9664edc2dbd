#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: the trained target's English-text serving rows again
# after the prefill kernel of section 18 (gpu_run45's: ~28.6K-token prompts, 2 GiB pool, 4096 output tokens, serve
# defaults), dense and --kv-budget 2048 in the same call; CONC=256 (default) or 64.
#   [CONC=64] bash bench/gpu_run73.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
C=${CONC:-256}
L=/tmp/okv_logs73; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=25500
for kv in 2048 dense; do
  port=$((port + 100))
  TAG=text_s13 KVS=$kv PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
    timeout ${T_RUN:-165} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 $C 2048 \
    "--device cuda" >> $L/serve.md 2>&1
  tail -1 $L/serve.md; save
done
