#!/bin/bash
# Session 38 of 2026-12-05: one call for two questions, the device being scarce that day.
# (1) The adaptive draft length on the GPU (run 16's target, the 32K prompt of chain's sample 0, dense and
#     budget 2048 with 2-bit codes, the trained draft and n-gram drafts; plain, K = 1 / 2 / 4 / 8, adaptive
#     K <= 8; 256 greedy tokens; bench/spec_adaptive.sh).
# (2) What the selections that keep dense's answers cost a server (bench/gpu_run170.sh's rows, run 16's
#     target: ~1K-token English prompts, 16384 output tokens, 2 GiB pool, c64): dense, the default (`current`,
#     Quest's bound), the codes, the codes with layer-ahead; each row's benchmark cut at 60 s, rows started
#     while the call's time allows (bench/gpu_run170.sh with ROWS / ROW_UNTIL / MAXD; its logs in $OUT/logs.tar).
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run176.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
M=${M:-train/checkpoints/run16}
t=chain
$B/oasiskv eval --dump-samples /tmp/$t.jsonl -m $M/target --task $t --context-len 32768 --num-samples 1 --seed 0 > /dev/null 2>&1
python3 -c "import json;d=json.loads(open('/tmp/$t.jsonl').readline());open('/tmp/$t.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
for kv in dense 2048; do
  X="--device cuda --kv-budget $kv"; [ $kv = dense ] || X="$X --kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25"
  for d in model:$M/draft ngram; do
    echo "### $t 32K, kv $kv, draft ${d%%:*}" | tee -a $OUT/spec.md
    timeout 100 bash bench/spec_adaptive.sh $B/oasiskv $M/target $d "--prompt-tokens @/tmp/$t.ids" 256 "$X" | tee -a $OUT/spec.md
  done
done
echo "spec done at $SECONDS s"
M=$M ROWS="dense bound_current codes_current codes_layerahead" ROW_UNTIL=$((${UNTIL:-490} - SECONDS)) MAXD=60 T_RUN=95 \
  bash bench/gpu_run170.sh
echo "done at $SECONDS s"
