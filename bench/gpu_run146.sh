#!/bin/bash
# Planned in session 23 of 2026-12-02 (not run in sessions 23 and 24: no device time left; since session 24 the
# speculating row below runs with the default --kv-verify-defer): run 10 at 32K,
# N = 40, serve defaults: (1) chain with 2-bit key codes at 2048, `current` with run 10's draft
# speculating one token a step (the CPU found speculation, not the lookahead rows alone, costs chain
# under a predicted selection: bench/ACCURACY.md, "Why lookahead loses chain"); (2) Quest's bound at
# 256 / 512 / 1024 on four families (the budget axis of the plot); (3) the oracle at 2048 with codes.
#   bash bench/gpu_run146.sh      (carry build-gc; JSON under $OUT; DEADLINE=seconds, default 105)
set -u
. bench/gpu_env.sh build-gc
M=train/checkpoints/run10
E="build-gc/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda"
run() { local left=$((${DEADLINE:-105} - SECONDS)); [ $left -gt 8 ] || { echo "skipped $1: no time"; return; }
  echo "== $1 ($left s left)"; timeout $left $E --json $OUT/$1.json "${@:2}" 2>&1 | grep "^| [a-z]"; }
run r10_chain_spec --task chain --kv-budget 2048 --kv-key-codes 2 --predict current --draft model:$M/draft --spec-tokens 1
for t in chain niah_multikey niah_single_text vt; do run r10_axis_$t --task $t --kv-budget 256,512,1024 --predict current; done
run r10_oracle --task chain,niah_single_text --kv-budget 2048 --kv-key-codes 2 --predict oracle
echo "done at $SECONDS s"
