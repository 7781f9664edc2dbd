#!/bin/bash
# GPU session of 2026-12-02 (23), one H200: training run 10: run 9's weights (train/checkpoints/run9,
# committed, so it travels with the tree) resumed at the 16K/32K phase for what is left of 565 s, on
# today's prompts: qa's answer prefix quoting the phrase and chain tables that fill the context
# (run 9 was trained on "Answer:" and on ~12K-token chain tables).
# The target and the draft come back under $OUT (target/ 4 files, draft.tar, train.log).
#   bash bench/gpu_run144.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
export PYTHONUNBUFFERED=1
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14" bash train/run_gpu.sh /tmp/tr $((565 - SECONDS)) 0 train/checkpoints/run9 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/target && cp /tmp/tr/target/* $OUT/target/ && tar -C /tmp/tr -cf $OUT/draft.tar draft && ls -la $OUT/target $OUT/draft.tar
