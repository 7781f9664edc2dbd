#!/bin/bash
# Planned in session 35 of 2026-12-04 (not run yet): the reasoning workload (chain_long: 128 lookups at random
# lines of a table that fills the context, ~1.1K generated tokens, scored on the final code) on an 8-layer
# model. chainlong1 (2 layers, CPU-trained) keeps it with the oracle and with layer-ahead chosen after the
# previous layer's attention, not with layer-ahead at the layer's start, which estimates layer 1's queries
# from the embeddings alone (bench/ACCURACY.md, "chain_long: a model"). Here run
# 15's 8-layer target and its draft (train/checkpoints/run15) train on for one call on chain and chain_long
# at 4K and 8K, then the engine evaluates chain_long at 8K (N = 16, seed 5, 2-bit codes, cache factor 2,
# sticky 0.25): dense, then layer-ahead after attention / layer-ahead / current / lookahead with the trained
# draft (and, since session 36, with --kv-verify-inline: the rows merged by rank) / oracle at 512 and 1024
# (6% and 12% of the context), each cell its own JSON (packed into
# $OUT/cells.tgz) in the time left.
# Session 37 ran it (bench/gpu_run173.sh; ACCURACY.md, "chain_long on the 8-layer target, on the GPU"): 274 s of
# training gave 2 of 16 final codes dense at 8K (partial 0.69). Its weights are kept out of git in
# build-ckpt/cl8a (target and draft); the next call resumes from them:
#   bash bench/park_checkpoints.sh keep; M=build-ckpt/cl8a BUDGET=300 bash bench/gpu_run172.sh
#   (carry build-gc, build-texts and build-ckpt)
#   bash bench/park_checkpoints.sh keep run15; BUDGET=300 bash bench/gpu_run172.sh
#   (carry build-gc and build-texts; $OUT/r/{target,draft.tar}, cells.tgz, train.log)
set -u
BUDGET=${BUDGET:-300}
M=${M:-train/checkpoints/run15}
. bench/gpu_train_env.sh   # $B, $OUT, the texts in $TX
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14 --texts $TX --tasks chain,chain_long --task-weights chain=1,chain_long=3 \
  --curriculum 0:4096=1,8192=1 --max-ctx 8192 --tokens-per-step 65536 --lr 1e-3 --draft-lr 1.5e-3 --decay-share 1 \
  --report-ctx 8192 --report-samples 8" \
    bash train/run_gpu.sh /tmp/tr $((BUDGET - SECONDS)) 0 $M 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/r/target && cp /tmp/tr/target/* $OUT/r/target/ && tar -C /tmp/tr -cf $OUT/r/draft.tar draft && ls -la $OUT/r/target $OUT/r/draft.tar
mkdir -p /tmp/cells
common="--model /tmp/tr/target --context-len 8192 --num-samples ${EVAL_N:-16} --seed 5 --device cuda --task chain_long"
sparse="--kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25"
cell() {  # name, then the eval flags
  local name=$1; shift
  local left=$((${END:-585} - SECONDS)); [ $left -gt 20 ] || { echo "$name: no time"; return; }
  timeout $left $B/oasiskv eval --sweep $common "$@" --json /tmp/cells/$name.json 2>&1 | grep "^| [a-z]" | grep -v "^| task"
  tar -C /tmp -czf $OUT/cells.tgz cells
}
cell dense --kv-budget dense
cell layerahead_attn --kv-budget 512,1024 --predict layer-ahead-attn $sparse
# session 37: with the early fetch (its blocks were in time 16-26% of the time without it)
OKV_LA_EARLY=1 cell layerahead_attn_early --kv-budget 512,1024 --predict layer-ahead-attn $sparse
cell layerahead --kv-budget 512,1024 --predict layer-ahead $sparse
cell current --kv-budget 512,1024 --predict current $sparse
cell lookahead_draft --kv-budget 512,1024 --predict lookahead --draft model:/tmp/tr/draft $sparse
# session 36: verify steps selecting with their own rows, merged by rank (--kv-merge auto's rule for them)
cell lookahead_draft_vi --kv-budget 512,1024 --predict lookahead --draft model:/tmp/tr/draft --kv-verify-inline $sparse
# session 37: one drafted token a step (on the CPU at 4K: partial 0.776 against 0.508 at 4, the trained draft accepted ~0.3)
cell lookahead_draft_vi_t1 --kv-budget 512,1024 --predict lookahead --draft model:/tmp/tr/draft --spec-tokens 1 --kv-verify-inline $sparse
cell oracle --kv-budget 512,1024 --predict oracle $sparse
echo "done at $SECONDS s"
