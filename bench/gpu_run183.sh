#!/bin/bash
# Session 41 of 2026-12-05: the server's draft gate with its rates kept per batch size (powers of two of the
# decoding requests): c64 and c16 rows, no drafts and adaptive alternating (gpu_run182, H100: c64 no drafts
# 37,092 / 39,763, adaptive 29,813 / 30,081 tok/s; gpu_run181 c16: 18,581 against 19,904).
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run183.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
nvidia-smi --query-gpu=name --format=csv,noheader
T=${M16:-train/checkpoints/run16}
L=/tmp/okv_logs183; mkdir -p $L
bash bench/make_text_prompts.sh $B/oasiskv $T/target 4096 128 /tmp/p4k.jsonl
port=36000
for c in 64 64 16; do
  for v in "nodraft|" "adaptive8|--draft ngram --spec-tokens 8 --spec-adaptive"; do
    [ $SECONDS -lt 480 ] || { echo "${v%%|*} c$c: no time left"; continue; }
    port=$((port + 100))
    TAG=${v%%|*} KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=2 MAX_DURATION=40 \
      CTX=$((4096 + 1024 + 64)) timeout 60 bash bench/serve_ab.sh build-gc "-m $T/target" 2 4000 1024 $c 2048 \
      "--device cuda --kv-key-codes 2 ${v#*|}" >> $L/serve.md 2>&1
    echo "${v%%|*} c$c: $(tail -1 $L/serve.md) steps $(grep -h '^oasiskv:engine_steps_total\|^oasiskv:steps_overlapped' $L/metrics_${v%%|*}_2048_c$c.txt | awk '{print $2}' | tr '\n' ' ')"
  done
done | tee $OUT/serve.md
echo "done at $SECONDS s"
