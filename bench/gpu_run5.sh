#!/bin/bash
# GPU session of 2026-11-29 (5): the second training run (resumed from the first, carried
# in train_run1/, with the 512-token start of the curriculum), then the accuracy sweep of
# the trained target in the CUDA engine (dense vs budgets x predict modes at 16K and 32K).
#   bash bench/gpu_run5.sh [train seconds]      (carry build-gc train_run1; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs; mkdir -p $L
OKV_TRAIN_ARGS="--phase-scale 1" OKV_BIN=build-gc/oasiskv timeout 520 train/run_gpu.sh /tmp/tr "${1:-400}" 0 train_run1 > $L/train.log 2>&1
echo "train: exit $?" >> $L/summary.txt
(cd /tmp/tr && tar cf $OUT/target.tar target && tar cf $OUT/draft.tar draft)
timeout ${EVAL_S:-120} build-gc/oasiskv eval --sweep --task niah_single_text,niah_multikey,niah_multivalue,vt,qa,chain \
  --model /tmp/tr/target --context-len 16384,32768 --num-samples 6 --kv-budget dense,512,2048 \
  --predict current,lookahead,oracle --device cuda --json $OUT/sweep.json > $L/sweep.txt 2> $L/sweep.err
echo "eval: exit $?" >> $L/summary.txt
tar cf $OUT/logs.tar -C $L .
grep -vE "^\[ *[0-9.]+s\] step" $L/train.log | tail -c 5000
echo ====; grep -E "^\[ *[0-9.]+s\] step" $L/train.log | awk 'NR % 6 == 0' | tail -14
cat $L/summary.txt $L/sweep.txt; tail -2 $L/sweep.err
