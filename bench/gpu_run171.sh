#!/bin/bash
# Planned in session 34 of 2026-12-04 (not run yet): training run 16 = run 15 (train/checkpoints/run15) trained
# on for one call at its last phase (2K / 16K / 32K by steps 1:1:4), the rate decaying from a lower start
# (target 1e-3, draft 1.5e-3, --decay-share 1), as run 12 was made from run 11 (bench/gpu_run166.sh: 196 of
# 280 from 174). Run 15's weak families at 32K (dense, N = 40) weigh more: multi-value 0.625 (its exact rate
# in 32K training batches was still rising, 0.18 -> 0.85, when the third call ended), chain 0.775, qa 0.85,
# single text and multi-query 0.875. Same texts, copy rows and sorted multi-value references as
# bench/gpu_run168.sh. The call ends with the engine's dense eval at 32K (N = 40 a family, ~55 s) and
# `layer-ahead` at 1024 with 2-bit codes on the families time leaves (run 15: 234 of dense's 236).
# Session 37 ran it (run 16: 251 of 280 dense), then once more from run 16 (run 17: 245): at each restart vt's
# exact rate in training batches fell from ~0.6 to ~0.1 (the rate back at 1e-3 after 50 warmup steps); the
# next try is a lower start, LR / DLR (session 37's plan: `M=train/checkpoints/run16 LR=3e-4 DLR=5e-4`, vt
# and chain weighed up: TW=... vt=1.5 ... chain=4).
#   bash bench/park_checkpoints.sh keep run15; BUDGET=400 bash bench/gpu_run171.sh
#   (carry build-gc and build-texts; $OUT/r/{target,draft.tar}, dense32k.json, la.tgz, train.log)
set -u
BUDGET=${BUDGET:-400}
M=${M:-train/checkpoints/run15}
. bench/gpu_train_env.sh   # $B, $OUT, the texts in $TX
CUR="0:2048=1,16384=1,32768=4"
TW=${TW:-"niah_single_text=1.5,niah_single_filler=0.25,niah_multikey=0.5,niah_multivalue=4,niah_multiquery=2,vt=0.75,qa=2.5,chain=3"}
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14 --texts $TX --text-copy-frac 0.125 --copy-frac 0.0625 --curriculum $CUR --task-weights $TW --mv-order sorted --lr ${LR:-1e-3} --draft-lr ${DLR:-1.5e-3} --decay-share 1 --report-ctx 32768 --report-samples 12" \
    bash train/run_gpu.sh /tmp/tr $((BUDGET - SECONDS)) 0 $M 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/r/target && cp /tmp/tr/target/* $OUT/r/target/ && tar -C /tmp/tr -cf $OUT/r/draft.tar draft && ls -la $OUT/r/target $OUT/r/draft.tar
EVAL_MODEL=/tmp/tr/target END=585 . bench/gpu_eval32k.sh
