#!/bin/bash
# Planned in session 29 of 2026-12-03 (not run: the session's device time went to training run 11): run
# 11's accuracy matrix at 32K, seven families, 2-bit key codes, serve defaults, N = 40 a cell, seed 0, as
# run 10's (ACCURACY.md, "The whole budget axis"). Groups, in order of need: (A) dense and `current` at
# 256 / 512 / 1024 / 2048 / 4096; (L) `layer-ahead` at 512 / 1024 / 2048 (its sticky share on, the
# default); (C) `lookahead` with run 11's draft (3 tokens a step) at 256 ... 4096; (B) `oracle` at 256 ...
# 4096. About 8-10 s a cell on the H200: A + L ~ 9 min, C ~ 6 min, B ~ 5 min. One JSON a (group, task),
# packed into one tarball at the end.
#   MGROUPS=AL bash bench/gpu_run165.sh      (carry build-gc; END=seconds, default 560; TASKS="..." a subset; M=another model folder)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
M=${M:-train/checkpoints/run11}
END=${END:-560}
E="$B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2"
mkdir -p $OUT/m
run() { local left=$((END - SECONDS)); [ $left -gt 25 ] || { echo "skipped $1: no time"; return; }
  timeout $left $E --json $OUT/m/$1.json "${@:2}" 2>&1 | grep "^| [a-z]" | sed "s/^/$1 /"; }
T="niah_single_text niah_multikey vt qa chain niah_multiquery niah_multivalue"
T=${TASKS:-$T}; G=${MGROUPS:-ALCB}
[[ $G == *A* ]] && for t in $T; do run A_$t --task $t --kv-budget dense,256,512,1024,2048,4096 --predict current; done
[[ $G == *L* ]] && for t in $T; do run L_$t --task $t --kv-budget 512,1024,2048 --predict layer-ahead; done
[[ $G == *C* ]] && for t in $T; do run C_$t --task $t --kv-budget 256,512,1024,2048,4096 --predict lookahead --draft model:$M/draft --spec-tokens 3; done
[[ $G == *B* ]] && for t in $T; do run B_$t --task $t --kv-budget 256,512,1024,2048,4096 --predict oracle; done
tar -C $OUT -czf $OUT/matrix.tgz m && rm -rf $OUT/m
echo "done at $SECONDS s"
