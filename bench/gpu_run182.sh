#!/bin/bash
# Session 41 of 2026-12-05: the adaptive draft length in generate after its costs are priced per row count (the
# staircase gpu_run181 logged on an H100), n-gram drafts on run 16's chain at 16K; and the server rows at c64 again
# (gpu_run181: nodraft 30,638, adaptive 28,328 tok/s). Before (gpu_run181): plain 2,913, K = 1/2/4/8 3,845 / 4,175 /
# 3,587 / 3,741, adaptive 3,403 tok/s (5.5 drafts a step).
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run182.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
nvidia-smi --query-gpu=name --format=csv,noheader
T=${M16:-train/checkpoints/run16}
R=$OUT
$B/oasiskv eval --dump-samples /tmp/c.jsonl -m $T/target --task chain --context-len 16384 --num-samples 1 --seed 0 > /dev/null 2>&1
python3 -c "import json;d=json.loads(open('/tmp/c.jsonl').readline());open('/tmp/c.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
{ echo "### chain 16K dense, draft ngram"
  timeout 100 bash bench/spec_adaptive.sh $B/oasiskv $T/target ngram "--prompt-tokens @/tmp/c.ids" 256 "--device cuda --kv-budget dense"
  OKV_LOG_LEVEL=debug $B/oasiskv generate -m $T/target -n 256 --temp 0 --ignore-eos --json --device cuda --kv-budget dense \
    --prompt-tokens @/tmp/c.ids --draft ngram --spec-tokens 8 --spec-adaptive 2>&1 >/dev/null | grep "debug"; } | tee $R/spec16k.md
L=/tmp/okv_logs182; mkdir -p $L
bash bench/make_text_prompts.sh $B/oasiskv $T/target 4096 128 /tmp/p4k.jsonl
port=35000
for v in "nodraft|" "adaptive8|--draft ngram --spec-tokens 8 --spec-adaptive" "nodraft|" "adaptive8|--draft ngram --spec-tokens 8 --spec-adaptive"; do
  [ $SECONDS -lt 200 ] || { echo "${v%%|*}: no time left"; continue; }
  port=$((port + 100))
  TAG=${v%%|*} KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=2 MAX_DURATION=40 \
    CTX=$((4096 + 1024 + 64)) timeout 80 bash bench/serve_ab.sh build-gc "-m $T/target" 2 4000 1024 64 2048 \
    "--device cuda --kv-key-codes 2 ${v#*|}" >> $L/serve.md 2>&1
  echo "${v%%|*} c64: $(tail -1 $L/serve.md)"
done | tee $R/serve.md
echo "done at $SECONDS s"
