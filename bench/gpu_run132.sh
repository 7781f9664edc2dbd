#!/bin/bash
# GPU session of 2026-12-02 (21), one H200: training run 9, part 2: resumed from part 1
# (bench/gpu_run131.sh's target and draft, carried as build-tr9a) at the 16K/32K phase, 565 s.
#   bash bench/gpu_run132.sh      (carry build-gc2 build-tr9a; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
export PYTHONUNBUFFERED=1
OKV_BIN=build-gc2/oasiskv OKV_TRAIN_ARGS="--workers 14" bash train/run_gpu.sh /tmp/tr $((565 - SECONDS)) 0 build-tr9a 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/target && cp /tmp/tr/target/* $OUT/target/ && tar -C /tmp/tr -cf $OUT/draft.tar draft && ls -la $OUT/target $OUT/draft.tar
