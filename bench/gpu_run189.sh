#!/bin/bash
# Session 44 of 2026-12-07: bench/gpu_run188.sh (training run 19: run 15 + one call on 2.6 times the haystack
# text) and bench/gpu_run187.sh (the draft gate's A/B, c64 once, and the CUDA tests) in one call, for a session
# whose device starts kept failing (~1,060 s left after ten refusals): training shortened to BUDGET=350 (~300 s;
# run 16 had 348 s from the same start), the dense eval at 32K, no layer-ahead cells; then the gate's rows.
# Returns r.tar (target + draft), train.log, dense32k.json, gate.tgz (serve.md, the gate's trials, test summary).
#   bash bench/park_checkpoints.sh keep run15; bash bench/gpu_run189.sh   (carry build-gc, build-gc2, build-texts)
set -u
BUDGET=${BUDGET:-350}
M=${M:-train/checkpoints/run15}
. bench/gpu_train_env.sh
CUR="0:2048=1,16384=1,32768=4"
TW="niah_single_text=1.5,niah_single_filler=0.25,niah_multikey=0.5,niah_multivalue=4,niah_multiquery=2,vt=0.75,qa=2.5,chain=3"
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14 --texts $TX --text-copy-frac 0.125 --copy-frac 0.0625 --curriculum $CUR --task-weights $TW --mv-order sorted --lr 1e-3 --draft-lr 1.5e-3 --decay-share 1 --report-ctx 32768 --report-samples 12" \
    bash train/run_gpu.sh /tmp/tr $((BUDGET - SECONDS)) 0 $M 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
tar -C /tmp/tr -cf $OUT/r.tar target draft && ls -la $OUT/r.tar
timeout 150 $B/oasiskv eval --sweep --model /tmp/tr/target --context-len 32768 --num-samples 40 --seed 0 \
  --device cuda --task niah_single_text,niah_multikey,niah_multivalue,niah_multiquery,vt,qa,chain --kv-budget dense \
  --json $OUT/dense32k.json 2>&1 | grep -v "^\[eval\].*sample" | tail -12
echo "training and eval done at $SECONDS s"
mkdir -p /tmp/g
OUT=/tmp/g CONCS=64 REPS=1 DEBUG_REP=1 TLIM=100 bash bench/gpu_run187.sh 2>&1 | tail -20
tar -C /tmp/g -czf $OUT/gate.tgz . && echo "done at $SECONDS s"
