#!/bin/bash
# Planned for the next GPU session (written in session 21, not yet run): the CUDA tests on the
# tree of session 21 (no CUDA change since they last passed, session 20), then run 9's target on
# chain with the table that now fills the context (session 21's generator: the earlier 32K chain
# cells were 12.2K-token prompts): dense, Quest's bound and 2-bit key codes at 1024 and 2048,
# N = 40 at 16K and 32K; and chain_long (128 lookups) dense at 8K, which run 9 was not trained on.
#   bash bench/gpu_run135.sh      (carry build-gc2; JSON under $OUT)
set -u
. bench/gpu_env.sh build-gc2
mkdir -p $OUT/tests
for t in cuda_ops cuda_graph cuda_engine sched dense_room cuda_resid prefix; do
  timeout 120 build-gc2/tests/test_$t > $OUT/tests/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/tests/$t.txt) at $SECONDS s"
done
M=train/checkpoints/run9/target
E="build-gc2/oasiskv eval --sweep --model $M --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --predict current"
run() { local left=$((560 - SECONDS)); [ $left -gt 20 ] || { echo "skipped $1: no time"; return; }
  echo "== $1 ($left s left)"; timeout $left $E --json $OUT/$1.json "${@:2}" 2>&1 | grep "^| [a-z]"; }
run r9_chain_filled --task chain --context-len 16384,32768 --kv-budget dense,1024,2048
run r9_chain_filled_codes --task chain --context-len 16384,32768 --kv-budget 1024,2048 --kv-key-codes 2
run r9_chain_long --task chain_long --context-len 8192 --kv-budget dense --num-samples 20
echo "done at $SECONDS s"
