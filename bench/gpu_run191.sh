#!/bin/bash
# Session 46 of 2026-12-07, on the warm machine after bench/gpu_run190.sh: run 19 at 32K with the design's own
# prediction (lookahead: the blocks of the next step chosen from the drafted tokens' queries, the draft model
# run 19's draft, 4 tokens a step) at 2048, N = 40 a family, against its dense and layer-ahead rows.
#   bash bench/gpu_run191.sh      (carry build-gc; train/checkpoints/run19 in the tree; $OUT/lk2048.tgz)
set -u
. bench/gpu_env.sh build-gc
T=train/checkpoints/run19
mkdir -p /tmp/lk2048
for t in niah_multivalue chain niah_multiquery vt qa niah_single_text niah_multikey; do
  left=$((${END:-400} - SECONDS)); [ $left -gt 25 ] || { echo "lookahead $t: no time"; continue; }
  timeout $left $B/oasiskv eval --sweep --model $T/target --context-len 32768 --num-samples 40 --seed 0 \
    --device cuda --task $t --kv-budget 2048 --predict lookahead --draft model:$T/draft --spec-tokens 4 \
    --kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25 --json /tmp/lk2048/$t.json 2>&1 | grep "^| [a-z]\|rror" | grep -v "^| task"
done
tar -C /tmp -czf $OUT/lk2048.tgz lk2048
echo "done at $SECONDS s"
