#!/bin/bash
# Session 27 of 2026-12-03: the run-10 accuracy matrix at 32K, filling the cells ACCURACY.md lacks, with
# 2-bit key codes and serve defaults, N = 40: (A) `current` at 256 and 4096; (B) `oracle` at 512, 1024,
# 2048; (C) `lookahead` with run 10's draft (3 tokens a step, the deferred own token: the defaults) at
# 512, 1024 and 2048; then, while time lasts, (D) oracle and (E) lookahead at 256 and 4096. Order: A, C, B, D, E. One JSON a (group, task), packed
# into one tarball at the end. Runs on build-gn (the decode attention's segment copies).
#   bash bench/gpu_run159.sh      (carry build-gn; END=seconds, default 480)
set -u
. bench/gpu_env.sh build-gn
B=build-gn
M=train/checkpoints/run10
END=${END:-480}
E="$B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2"
mkdir -p $OUT/m
run() { local left=$((END - SECONDS)); [ $left -gt 25 ] || { echo "skipped $1: no time"; return; }
  timeout $left $E --json $OUT/m/$1.json "${@:2}" 2>&1 | grep "^| [a-z]" | sed "s/^/$1 /"; }
T="niah_single_text niah_multikey vt qa chain niah_multiquery niah_multivalue"
# MGROUPS=B TASKS="vt qa" runs those only (a second call for what the first left)
T=${TASKS:-$T}; G=${MGROUPS:-ACBDE}
[[ $G == *A* ]] && for t in $T; do run A_$t --task $t --kv-budget 256,4096 --predict current; done
[[ $G == *C* ]] && for t in $T; do run C_$t --task $t --kv-budget 512,1024,2048 --predict lookahead --draft model:$M/draft --spec-tokens 3; done
[[ $G == *B* ]] && for t in $T; do run B_$t --task $t --kv-budget 512,1024,2048 --predict oracle; done
[[ $G == *D* ]] && for t in $T; do run D_$t --task $t --kv-budget 256,4096 --predict oracle; done
[[ $G == *E* ]] && for t in $T; do run E_$t --task $t --kv-budget 256,4096 --predict lookahead --draft model:$M/draft --spec-tokens 3; done
tar -C $OUT -czf $OUT/matrix.tgz m && rm -rf $OUT/m
echo "done at $SECONDS s"
