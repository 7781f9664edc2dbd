#!/bin/bash
# Session 38 of 2026-12-05: the adaptive draft length in the server on the GPU. `oasiskv serve` with run 16's target
# (budget 2048, 2-bit codes, serve defaults otherwise), ~4K-token English prompts (held-out texts), 1024 output
# tokens, c16 then c64, three servers each: no drafts, n-gram drafts 4 a step, n-gram drafts adaptive (0..8 a step);
# each benchmark cut at 40 s (bench serve --max-duration), rows started while the call's time allows.
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run177.sh     (carry build-gc; $OUT/logs.tar)
set -u
. bench/gpu_env.sh build-gc
M=${M:-train/checkpoints/run16}
L=/tmp/okv_logs177; mkdir -p $L
bash bench/make_text_prompts.sh $B/oasiskv $M/target 4096 128 /tmp/p4k.jsonl
port=32000
for c in 16 64; do
  for v in "nodraft|" "ngram4|--draft ngram --spec-tokens 4" "adaptive8|--draft ngram --spec-tokens 8 --spec-adaptive"; do
    [ $SECONDS -lt ${UNTIL:-520} ] || { echo "${v%%|*} c$c: no time left"; continue; }
    port=$((port + 100))
    TAG=${v%%|*} KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=2 MAX_DURATION=40 CTX=$((4096 + 1024 + 64)) \
      timeout 80 bash bench/serve_ab.sh build-gc "-m $M/target" 2 4000 1024 $c 2048 "--device cuda --kv-key-codes 2 ${v#*|}" >> $L/serve.md 2>&1
    echo "${v%%|*} c$c: $(tail -1 $L/serve.md)"
    grep -h "spec_decode_num_draft_tokens_total\|spec_decode_num_accepted_tokens_total\|spec_decode_num_drafts_total" \
      $L/metrics_${v%%|*}_2048_c$c.txt 2>/dev/null | grep -v "^#" | tr '\n' ' '; echo
    tar cf $OUT/logs.tar -C $L .
  done
done
echo "done at $SECONDS s"
