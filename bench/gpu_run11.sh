#!/bin/bash
# GPU session of 2026-11-29 (11), one H200, two jobs side by side:
#  (1) the accuracy sweep of the trained target (train/checkpoints/run3) at 32K with the
#      selector's current rules (first decode step selects inline; successor blocks),
#      20 samples per cell, qa included;
#  (2) training run 4: 460 s resumed from run 3 (train/run_gpu.sh; its own report at the end).
#   bash bench/gpu_run11.sh      (carry build-gc; results under $OUT: logs.tar, run4.tar, sweep32k.json)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs11; mkdir -p $L
( timeout ${SWEEP_S:-560} build-gc/oasiskv eval --sweep \
    --task niah_single_text,vt,niah_multikey,qa --model train/checkpoints/run3/target --context-len 32768 \
    --num-samples ${N:-20} --kv-budget dense,256,512,1024,2048,4096 --predict current,lookahead,oracle --device cuda \
    --json $OUT/sweep32k.json > $L/sweep.txt 2> $L/sweep.err; echo "sweep: exit $?" >> $L/summary.txt ) &
sweeper=$!
OKV_BIN=build-gc/oasiskv timeout ${TRAIN_S:-500} sh train/run_gpu.sh /tmp/run4 ${TRAIN_BUDGET:-460} 4 train/checkpoints/run3 > $L/train_run4.txt 2>&1
echo "train: exit $?" >> $L/summary.txt
tar cf $OUT/run4.tar -C /tmp run4 2>/dev/null
wait $sweeper
tar cf $OUT/logs.tar -C $L .
cat $L/summary.txt; grep -E "FINAL|saved" $L/train_run4.txt; tail -30 $L/sweep.txt; tail -3 $L/sweep.err
