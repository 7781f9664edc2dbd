#!/bin/bash
# Session 41 of 2026-12-05: why the adaptive draft length loses on the GPU (gpu_run179, H100: generate at 16K with
# n-gram drafts, adaptive 2,410 tok/s against K = 2's 4,425 and plain's 3,003; the server at c64, adaptive 24,472
# against no drafts' 37,943 after the per-step gate). Debug logs: generate's forward seconds by rows and the cost
# line the chooser fitted; the server's gate rates (drafted against overlapped steps, a request's tokens a second).
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run180.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
nvidia-smi --query-gpu=name --format=csv,noheader
T=${M16:-train/checkpoints/run16}
$B/oasiskv eval --dump-samples /tmp/c.jsonl -m $T/target --task chain --context-len 16384 --num-samples 1 --seed 0 > /dev/null 2>&1
python3 -c "import json;d=json.loads(open('/tmp/c.jsonl').readline());open('/tmp/c.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
G="-m $T/target -n 256 --temp 0 --ignore-eos --json --device cuda --kv-budget dense --prompt-tokens @/tmp/c.ids"
for v in "--draft ngram --spec-tokens 2" "--draft ngram --spec-tokens 8" "--draft ngram --spec-tokens 8 --spec-adaptive" \
         "--draft model:$T/draft --spec-tokens 8 --spec-adaptive"; do
  echo "### generate $v"
  OKV_LOG_LEVEL=debug $B/oasiskv generate $G $v 2> /tmp/g.err | python3 -c "import json,sys;d=json.load(sys.stdin);print(d['stats']['decode_tokens_per_s'], d['spec'])"
  grep -h "speculative decoding:\|adaptive drafts:" /tmp/g.err
done | tee $OUT/generate.md
L=/tmp/okv_logs180; mkdir -p $L
bash bench/make_text_prompts.sh $B/oasiskv $T/target 4096 128 /tmp/p4k.jsonl
port=33000
for v in "nodraft|" "adaptive8|--draft ngram --spec-tokens 8 --spec-adaptive"; do
  port=$((port + 100))
  OKV_LOG_LEVEL=debug TAG=${v%%|*} KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=2 MAX_DURATION=40 \
    CTX=$((4096 + 1024 + 64)) timeout 80 bash bench/serve_ab.sh build-gc "-m $T/target" 2 4000 1024 64 2048 \
    "--device cuda --kv-key-codes 2 ${v#*|}" >> $L/serve.md 2>&1
  tail -1 $L/serve.md
  grep -h "steps_total\|steps_overlapped\|spec_decode_num_drafts_total" $L/metrics_${v%%|*}_2048_c64.txt | grep -v "^#"
  grep -h "drafted steps" $L/serve_${v%%|*}_2048_c64.log | head -40
done
tar cf $OUT/logs.tar -C $L .
echo "done at $SECONDS s"
