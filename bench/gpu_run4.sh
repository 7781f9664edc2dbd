#!/bin/bash
# GPU session of 2026-11-29 (4): the first training run of the evaluation models, then a
# short check of the trained target in the CUDA engine.
#   bash bench/gpu_run4.sh [train seconds]      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs; mkdir -p $L
OKV_BIN=build-gc/oasiskv timeout 560 train/run_gpu.sh /tmp/tr "${1:-470}" 0 > $L/train.log 2>&1
echo "train: exit $?" >> $L/summary.txt
(cd /tmp/tr && tar cf $OUT/target.tar target && tar cf $OUT/draft.tar draft)
timeout 70 build-gc/oasiskv eval --sweep --task niah_single_text,niah_multikey,vt,chain --model /tmp/tr/target \
  --context-len 16384 --num-samples 3 --kv-budget dense,1024 --predict lookahead --device cuda > $L/eval16k.txt 2> $L/eval16k.err
echo "eval: exit $?" >> $L/summary.txt
tar cf $OUT/logs.tar -C $L .
grep -vE "^\[ *[0-9.]+s\] step" $L/train.log | tail -c 7000
echo ====; grep -E "^\[ *[0-9.]+s\] step" $L/train.log | awk 'NR % 8 == 0' | tail -12
cat $L/summary.txt $L/eval16k.txt; tail -3 $L/eval16k.err
