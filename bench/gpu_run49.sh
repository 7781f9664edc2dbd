#!/bin/bash
# Prepared for a next GPU session (one H200); not yet run. Training run 6: a deeper target
# (12 layers instead of 8, hidden 256: ~10.5M parameters, ~21 MB in bf16, under the 25 MB
# cap) from scratch, 500 s, seed 0, for the families the 8-layer target never learned
# (multi-value, multi-query, chain: each k-th answer lives in a different needle, which a
# single copy circuit does not reach; bench/ACCURACY.md). Its report gives dense accuracy per
# family at 16K and 32K on held-out texts; compare with run 3 (bench/results/h200_train_run3.txt).
#   bash bench/gpu_run49.sh      (carry build-gc; results under $OUT: logs.tar, target.tar, draft.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs49; mkdir -p $L
OKV_TRAIN_ARGS="--target-layers 12" OKV_BIN=build-gc/oasiskv timeout 560 sh train/run_gpu.sh /tmp/run6 ${TRAIN_S:-500} 0 \
  > $L/train_run6.txt 2>&1
echo "train: exit $?" | tee -a $L/summary.txt
(cd /tmp/run6 2>/dev/null && tar cf $OUT/target.tar target && tar cf $OUT/draft.tar draft)
tar cf $OUT/logs.tar -C $L .
grep -vE "^\[ *[0-9.]+s\] step" $L/train_run6.txt | tail -c 3000
