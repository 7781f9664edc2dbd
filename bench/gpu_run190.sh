#!/bin/bash
# Session 46 of 2026-12-07: after training run 19 (bench/gpu_run188.sh: 255 of 280 at 32K dense, layer-ahead at
# 1024 250) and the gate's c64 rows (bench/gpu_run187.sh), on the same warm machine: run 19's selection at larger
# budgets (layer-ahead, 2-bit codes, serve defaults; 2048 and 4096 of 32K), N = 40 a family, to see where its
# 5-point gap at 1024 (multi-value 37 -> 34, chain 35 -> 32) closes; then the draft gate at c16 (no drafts
# against adaptive, once each, run 19 as the model; the CUDA tests ran in the call before).
#   mkdir -p train/checkpoints/run19 (run 19's target and draft); bash bench/park_checkpoints.sh keep run19
#   bash bench/gpu_run190.sh      (carry build-gc; $OUT/la2048.tgz, la4096.tgz, serve16.md)
set -u
. bench/gpu_env.sh build-gc
T=train/checkpoints/run19/target
for bud in 2048 4096; do
  mkdir -p /tmp/la$bud
  for t in niah_multivalue chain niah_multiquery vt qa niah_single_text niah_multikey; do
    left=$((${END:-330} - SECONDS)); [ $left -gt 25 ] || { echo "layer-ahead $bud $t: no time"; continue; }
    timeout $left $B/oasiskv eval --sweep --model $T --context-len 32768 --num-samples 40 --seed 0 \
      --device cuda --task $t --kv-budget $bud --predict layer-ahead --kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25 \
      --json /tmp/la$bud/$t.json 2>&1 | grep "^| [a-z]" | grep -v "^| task"
  done
  tar -C /tmp -czf $OUT/la$bud.tgz la$bud
done
echo "evals done at $SECONDS s"
L=/tmp/okv_logs190; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv $T 4096 128 /tmp/p4k.jsonl
port=39000
for v in "nodraft|" "after|--draft ngram --spec-tokens 8 --spec-adaptive"; do
  IFS='|' read -r tag args <<< "$v"
  port=$((port + 100))
  TAG=${tag}1 KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=8 MAX_DURATION=60 CTX=$((4096 + 1024 + 64)) \
    timeout 90 bash bench/serve_ab.sh build-gc "-m $T" 2 4000 1024 16 2048 "--device cuda --kv-key-codes 2 $args" >> $L/serve.md 2>&1
  echo "$tag c16: $(tail -1 $L/serve.md)"
done | tee $OUT/serve16.md
echo "done at $SECONDS s"
