#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: the reasoning shape (~1K-token English prompts,
# 16384 output tokens, 2 GiB pool, serve defaults, overlapped decoding) at concurrency 1 (2
# prompts, one at a time), 16 and 256: budget 2048 with the fp8 host tier, and dense.
#   bash bench/gpu_run95.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs95; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 256 /tmp/text1k_256.jsonl
port=26000
for c in 1 16 256; do
  pps=1; [ $c = 1 ] && pps=2
  for v in "2048:--device cuda --kv-host-dtype fp8:fp8" "dense:--device cuda:dense"; do
    kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
    port=$((port + 100))
    TAG=reason95_$tag KVS=$kv PORT0=$port DATASET=/tmp/text1k_256.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
      PROMPTS_PER_SLOT=$pps timeout 200 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 $c \
      2048 "$extra" >> $L/serve_reason.md 2>&1
    echo "c$c $tag: $(tail -1 $L/serve_reason.md)"
  done
done
cp $L/serve_reason.md $OUT/
