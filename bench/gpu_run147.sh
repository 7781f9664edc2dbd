#!/bin/bash
# Planned in session 23 of 2026-12-02, extended and run in session 24 (one H200, followed by gpu_run148.sh in
# the same command; output in bench/results/h200_s24/; its n-gram cells asked for --spec-tokens without
# --draft, which eval refuses, and did not run: gpu_run149.sh): verify steps that select with their own
# queries (`--kv-verify-inline`) and that defer a stale row's own token (`--kv-verify-defer`) on the CUDA engine.
#  1. the CUDA tests (none of them speculates: the sweeps below are the CUDA path's check); the prefill
#     kernel's split on the SmolLM2 shape at 8K, where PyTorch's FA2 was ahead (RESULTS 35);
#  2. run 10 at 32K, N = 40, 2-bit key codes at 2048, run 10's draft speculating 1 and 3 tokens a step
#     and n-gram drafts 4 a step: lookahead with and without --kv-verify-inline (session 24: and
#     --kv-verify-defer), on chain and vt, inline also on qa and multi-key (accuracy, and the cells'
#     seconds, resident in time and fetched bytes; `current` without a draft is gpu_run145's r10_codes);
#  3. decode speed of one speculating request at 32K with and without the switch (below).
#   bash bench/gpu_run147.sh      (carry build-gc; JSON under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
mkdir -p $OUT/tests
for t in cuda_ops cuda_graph cuda_engine sched dense_room cuda_resid prefix; do
  timeout 100 $B/tests/test_$t > $OUT/tests/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/tests/$t.txt) at $SECONDS s"
done
grep -h "FAIL" $OUT/tests/*.txt | head -20
# the SmolLM2 shape at 8K / 512 rows, where PyTorch's FA2 beat the kernel (177 against 135 TFLOPS,
# RESULTS 35): 36 tiles split in 3 parts by default; parts 1 / 2 / 3 / 4 and the two-warpgroup kernel
for sp in 1 2 3 4; do
  echo "== 9,3,64 8K 512 rows OKV_PREFILL_SPLIT=$sp: $(OKV_PREFILL_SPLIT=$sp timeout 30 $B/bench/cuda_attention --prefill 512,2048 --ctx 8192 --shape 9,3,64 2>&1 | grep -E 'prefill kernel  |rror' | tr '\n' ' ')"
done
echo "== 9,3,64 OKV_PREFILL_WS=0: $(OKV_PREFILL_WS=0 timeout 30 $B/bench/cuda_attention --prefill 512,2048 --ctx 8192 --shape 9,3,64 2>&1 | grep -E 'prefill kernel  |rror' | tr '\n' ' ')"
M=train/checkpoints/run10
E="$B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2 --predict lookahead --draft model:$M/draft"
run() { local left=$((330 - SECONDS)); [ $left -gt 20 ] || { echo "skipped $1: no time"; return; }
  echo "== $1 ($left s left)"; timeout $left $E --json $OUT/$1.json "${@:2}" 2>&1 | grep "^| [a-z]"; }
# (lookahead + draft, 1 token a step, without the switch: gpu_run145's r10_lookahead, chain 1 / 40)
run r10_la1_vi --task chain,qa,niah_multikey --kv-budget 2048 --spec-tokens 1 --kv-verify-inline
run r10_la3 --task chain,vt --kv-budget 2048 --spec-tokens 3 --no-kv-verify-defer
run r10_la3_vi --task chain,vt --kv-budget 2048 --spec-tokens 3 --kv-verify-inline
# the cheaper alternative found on the CPU at the start of session 24 (--kv-verify-defer): a verify step's
# own token is dropped when it came from a row that read a stale set; the last accepted draft runs again as
# the next step's first row (chain 4K budget 1024: lookahead + draft 3 -> 10 of 12)
run r10_la3_defer --task chain,vt --kv-budget 2048 --spec-tokens 3 --kv-verify-defer
# n-gram drafts, 4 a step (what serve --draft ngram does): plain, inline, deferred
E="${E% --draft model:$M/draft}"
run r10_ng4 --task chain,vt --kv-budget 2048 --spec-tokens 4 --no-kv-verify-defer
run r10_ng4_vi --task chain,vt --kv-budget 2048 --spec-tokens 4 --kv-verify-inline
run r10_ng4_defer --task chain,vt --kv-budget 2048 --spec-tokens 4 --kv-verify-defer
# 4. decode speed of one speculating request: a 32K chain prompt, 256 tokens, n-gram drafts (4 a step),
#    budget 2048 with codes, without and with the switch, and without drafts (tokens/s, resident in
#    time, stall: `generate --json`). On this session's CPU at 2K / budget 256 the switch took decode
#    from 45.5 to 20.7 tokens/s (in time 0.97 -> 0.46): the inline scoring and fetches on the critical path
$B/oasiskv eval --dump-samples /tmp/s32k.jsonl -m $M/target --task chain --context-len 32768 --num-samples 1 --seed 0 > /dev/null 2>&1
# (a 32K prompt's ids exceed one command-line argument's 128 KiB: --prompt-tokens @FILE)
python3 -c "import json; print(','.join(map(str, json.loads(open('/tmp/s32k.jsonl').readline())['prompt_tokens'])))" > /tmp/s32k.ids
G="$B/oasiskv generate -m $M/target --prompt-tokens @/tmp/s32k.ids -n 256 --temp 0 --ignore-eos --kv-budget 2048 --kv-key-codes 2 --device cuda --json"
for v in "" "--draft ngram --spec-tokens 4 --no-kv-verify-defer" "--draft ngram --spec-tokens 4 --kv-verify-inline" "--draft ngram --spec-tokens 4 --kv-verify-defer" "--draft model:$M/draft --spec-tokens 3 --no-kv-verify-defer" "--draft model:$M/draft --spec-tokens 3 --kv-verify-inline" "--draft model:$M/draft --spec-tokens 3 --kv-verify-defer"; do
  reps="1 2"; [[ "$v" == *model:* ]] && reps=1
  for rep in $reps; do
    [ $SECONDS -lt 430 ] || { echo "skipped generate $v: no time"; continue; }
    echo "generate 32K chain, 256 tokens, $v (rep $rep): $(timeout 40 $G $v 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); d=j['stats']; print(d['decode_tokens_per_s'], d['kv'], j.get('spec', ''))")"
  done
done
echo "done at $SECONDS s"
