#!/bin/bash
# Planned in session 37 of 2026-12-05 (not run yet): the price of choosing layer l+1's blocks after layer l's
# attention (`--predict layer-ahead-attn`) on the GPU, and the early fetch that should remove it. Session 37
# measured its blocks resident in time 16-26% of the time on the 8-layer 7M target (chain_long at 8K): behind
# one MLP of hidden 256 no fetch finishes. OKV_LA_EARLY=1 (an experiment, engine.c) also chooses layer l+1's
# blocks at layer l's start from the start's estimate and starts their fetch, then chooses again after
# attention (the sticky cut keeps blocks on the device or on their way first), so the second choice should
# find most of its blocks there. (1) test_cuda_engine (variant 8: the early fetch, device against host
# residency). (2) The 8B-shaped step (random weights, fp8 host tier, budget 2048, serve defaults) at batch
# 1 / 4 / 16, 8K and 32K: `current`, `layer-ahead`, `layer-ahead-attn`, `layer-ahead-attn` + early: ms a
# step, fetched MiB, resident in time. (3) Real prompts: run 16 at 32K (chain's and multi-query's sample 0),
# 256 greedy tokens, budget 2048, codes: decode tok/s, fetched MB, resident in time, stall, the same four.
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run174.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
M=${M:-train/checkpoints/run16}
# session 37's untested case: test_cuda_engine variant 8 (the early fetch); test_cuda_resid as a check
for t in test_cuda_resid test_cuda_engine; do
  timeout 90 $B/tests/$t > $OUT/$t.txt 2>&1; echo "$t rc $?: $(tail -n 1 $OUT/$t.txt)"
done
grep -h "early" $OUT/test_cuda_*.txt | head -4
S="--config bench/configs/llama3-8b --device cuda --steps 20 --warmup 5 --batch 1,4,16 --ctx 8192,32768 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
for v in current:0 layer-ahead:0 layer-ahead-attn:0 layer-ahead-attn:1; do
  OKV_LA_EARLY=${v#*:} timeout 110 $B/bench/bench_step $S --predict ${v%:*} 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-11 |
    sed "s/^/${v%:*} early ${v#*:} /" | tee -a $OUT/step.md
done
G="--kv-budget 2048 --kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25 --device cuda -n 256 --temp 0 --ignore-eos --json"
for t in chain niah_multiquery; do
  $B/oasiskv eval --dump-samples /tmp/$t.jsonl -m $M/target --task $t --context-len 32768 --num-samples 1 --seed 0 > /dev/null 2>&1
  python3 -c "import json;d=json.loads(open('/tmp/$t.jsonl').readline());open('/tmp/$t.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
  for v in current:0 layer-ahead:0 layer-ahead-attn:0 layer-ahead-attn:1; do
    OKV_LA_EARLY=${v#*:} timeout 60 $B/oasiskv generate -m $M/target --prompt-tokens @/tmp/$t.ids $G --predict ${v%:*} 2>/dev/null > /tmp/g.json
    python3 -c "
import json;d=json.load(open('/tmp/g.json'));s=d['stats'];k=s['kv']
print('$t ${v%:*} early ${v#*:}: decode %.1f tok/s, fetched %.1f MB, in time %.4f, stall %.2f ms, tokens %s' % (s['decode_tokens_per_s'], k['fetch_bytes']/1e6, k['resident_in_time'], k['stall_ms'], hash(tuple(d['tokens']))%100000))" | tee -a $OUT/generate.md
  done
done
echo "done at $SECONDS s"
