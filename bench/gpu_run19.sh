#!/bin/bash
# Prepared for a next GPU session (one H200); not yet run. Training run 5: the evaluation
# models from scratch with the multi-value reference in text order (the fix of session 4),
# 500 s, seed 0 (train/run_gpu.sh; its report at the end gives dense accuracy per family at
# 16K and 32K on held-out texts). A 32K sweep of the new target takes a call of its own
# (bench/gpu_run11.sh's command with --model pointing at the unpacked target).
#   bash bench/gpu_run19.sh      (carry build-gc; results under $OUT: logs.tar, target.tar, draft.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs19; mkdir -p $L
OKV_BIN=build-gc/oasiskv timeout 560 sh train/run_gpu.sh /tmp/run5 ${TRAIN_S:-500} 0 > $L/train_run5.txt 2>&1
echo "train: exit $?" | tee -a $L/summary.txt
(cd /tmp/run5 2>/dev/null && tar cf $OUT/target.tar target && tar cf $OUT/draft.tar draft)
tar cf $OUT/logs.tar -C $L .
grep -vE "^\[ *[0-9.]+s\] step" $L/train_run5.txt | tail -c 3000
