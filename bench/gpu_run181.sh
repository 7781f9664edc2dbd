#!/bin/bash
# Session 41 of 2026-12-05: the adaptive draft length after three fixes from gpu_run180's debug logs (H100):
# (1) generate warms the verify steps' shapes (1..K+1 rows, twice each) on a scratch sequence before the
# prompt: the first 8-row step had taken 52 ms (then 0.72 ms), the adaptive run 5.5 ms for its first 5-row
# steps, which made the chooser's cost line 0.1 ms + 0.2 ms a row and stopped the drafts; (2) the first two
# forwards of each row count are left out of the cost line; (3) the server drafts no step while a prompt is
# being computed (46% of the c64 steps had drafted, the gate unmeasured on prefill steps).
# Before (gpu_run179/180, H100): 16K chain, n-gram: plain 3,003, K=2 4,425, adaptive 2,410-2,472 tok/s;
# draft model: plain 2,963, K=1 1,982, adaptive 1,782-2,241. Server c64: nodraft 37,943-42,179, adaptive
# 24,472-31,726; c16: nodraft 17,891, ngram4 19,683, adaptive 20,507.
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run181.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
nvidia-smi --query-gpu=name --format=csv,noheader
T=${M16:-train/checkpoints/run16}
R=$OUT
$B/oasiskv eval --dump-samples /tmp/c.jsonl -m $T/target --task chain --context-len 16384 --num-samples 1 --seed 0 > /dev/null 2>&1
python3 -c "import json;d=json.loads(open('/tmp/c.jsonl').readline());open('/tmp/c.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
for d in ngram model:$T/draft; do
  echo "### chain 16K dense, draft ${d%%:*}"
  timeout 100 bash bench/spec_adaptive.sh $B/oasiskv $T/target $d "--prompt-tokens @/tmp/c.ids" 256 "--device cuda --kv-budget dense"
  OKV_LOG_LEVEL=debug $B/oasiskv generate -m $T/target -n 256 --temp 0 --ignore-eos --json --device cuda --kv-budget dense \
    --prompt-tokens @/tmp/c.ids --draft $d --spec-tokens 8 --spec-adaptive 2>&1 >/dev/null | grep "debug"
done | tee $R/spec16k.md
L=/tmp/okv_logs181; mkdir -p $L
bash bench/make_text_prompts.sh $B/oasiskv $T/target 4096 128 /tmp/p4k.jsonl
port=34000
for c in 64 16; do
  for v in "nodraft|" "adaptive8|--draft ngram --spec-tokens 8 --spec-adaptive" "ngram4|--draft ngram --spec-tokens 4"; do
    [ $SECONDS -lt 360 ] || { echo "${v%%|*} c$c: no time left"; continue; }
    port=$((port + 100))
    OKV_LOG_LEVEL=debug TAG=${v%%|*} KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=2 MAX_DURATION=40 \
      CTX=$((4096 + 1024 + 64)) timeout 80 bash bench/serve_ab.sh build-gc "-m $T/target" 2 4000 1024 $c 2048 \
      "--device cuda --kv-key-codes 2 ${v#*|}" >> $L/serve.md 2>&1
    echo "${v%%|*} c$c: $(tail -1 $L/serve.md)"
    grep -h "engine_steps_total\|steps_overlapped\|spec_decode_num_drafts_total" $L/metrics_${v%%|*}_2048_c$c.txt | grep -v "^#" | tr '\n' ' '; echo
    grep -h "drafted steps" $L/serve_${v%%|*}_2048_c$c.log | tail -3
  done
done | tee $R/serve.md
tar cf $R/logs.tar -C $L .
echo "done at $SECONDS s"
