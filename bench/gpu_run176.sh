#!/bin/bash
# Session 38 of 2026-12-05: one call for two questions, the device being scarce that day.
# (1) The adaptive draft length on the GPU (bench/gpu_run175.sh's chain half: run 16's target, the 32K prompt of
#     chain's sample 0, dense and budget 2048 with 2-bit codes, the trained draft and n-gram drafts; plain,
#     K = 1 / 2 / 4 / 8, adaptive K <= 8; 256 greedy tokens).
# (2) What the selections that keep dense's answers cost a server (bench/gpu_run170.sh's rows, run 16's
#     target: ~1K-token English prompts, 16384 output tokens, 2 GiB pool, c64): dense, the default (`current`,
#     Quest's bound), the codes, the codes with layer-ahead; ~80 s a row, while the call's time allows.
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
C=${C:-64}
L=/tmp/okv_logs176; mkdir -p $L
bash bench/make_text_prompts.sh $B/oasiskv $M/target 1024 $C /tmp/text1k_prompts.jsonl
port=31000
row() {  # tag kv extra
  [ $SECONDS -lt ${ROW_UNTIL:-490} ] || { echo "$1: no time left"; return; }
  port=$((port + 100))
  TAG=$1 KVS=$2 PORT0=$port DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) PROMPTS_PER_SLOT=1 \
    MAX_DURATION=${MAXD:-60} timeout ${T_RUN:-95} bash bench/serve_ab.sh build-gc "-m $M/target" 2 1000 16384 $C 2048 "--device cuda $3" >> $L/serve.md 2>&1
  echo "$1: $(tail -1 $L/serve.md)"
  tar cf $OUT/logs.tar -C $L .
}
row dense dense ""
row bound_current 2048 ""
row codes_current 2048 "--kv-key-codes 2"
row codes_layerahead 2048 "--predict layer-ahead --kv-key-codes 2"
echo "done at $SECONDS s"
