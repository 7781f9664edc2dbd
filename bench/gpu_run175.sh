#!/bin/bash
# Planned in session 38 of 2026-12-05: the adaptive draft length (--spec-adaptive, src/spec/spec_len.c) on the
# GPU, where a step's fixed cost dominates its rows' (the CPU's is mostly per row): run 16's target (7.3M) with its
# trained draft and with n-gram drafts, the 32K prompts of chain's and multi-query's sample 0 and an English text
# prompt, dense and at budget 2048 (2-bit codes), 256 greedy tokens: plain, K = 1 / 2 / 4 / 8 fixed, adaptive
# (K <= 8) - decode tokens/s, drafts a step, acceptance (bench/spec_adaptive.sh). Then test_sched and
# test_cuda_engine as a check of the build.
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run175.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
M=${M:-train/checkpoints/run16}
for t in chain niah_multiquery; do
  $B/oasiskv eval --dump-samples /tmp/$t.jsonl -m $M/target --task $t --context-len 32768 --num-samples 1 --seed 0 > /dev/null 2>&1
  python3 -c "import json;d=json.loads(open('/tmp/$t.jsonl').readline());open('/tmp/$t.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
done
for t in chain niah_multiquery; do
  for kv in dense 2048; do
    X="--device cuda --kv-budget $kv"; [ $kv = dense ] || X="$X --kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25"
    for d in model:$M/draft ngram; do
      echo "### $t 32K, kv $kv, draft ${d%%:*}" | tee -a $OUT/spec.md
      timeout 100 bash bench/spec_adaptive.sh $B/oasiskv $M/target $d "--prompt-tokens @/tmp/$t.ids" 256 "$X" | tee -a $OUT/spec.md
    done
  done
done
timeout 60 $B/tests/test_sched > $OUT/test_sched.txt 2>&1; echo "test_sched rc $?: $(tail -n 1 $OUT/test_sched.txt)"
echo "done at $SECONDS s"
