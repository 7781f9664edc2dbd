#!/bin/bash
# GPU session of 2026-12-01 (19), one H200: training run 7, resumed from run 3 for 370 s at the
# 16K/32K phase, with multi-query's reference restating each key before its value (the reference
# format a 512-token CPU experiment learned to 0.94 against 0.03: bench/ACCURACY.md). The target
# comes back under $OUT/target (the draft is not brought back: 8 files at most).
#   bash bench/gpu_run125.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
export PYTHONUNBUFFERED=1
OKV_BIN=build-gc2/oasiskv OKV_TRAIN_ARGS="--workers 14" bash train/run_gpu.sh /tmp/tr 370 0 train/checkpoints/run3 2>&1 | tee $OUT/train.log
mkdir -p $OUT/target && cp /tmp/tr/target/* $OUT/target/ && ls -la $OUT/target
