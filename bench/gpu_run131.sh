#!/bin/bash
# GPU session of 2026-12-02 (21), one H200: training run 9, part 1: from scratch with
# chain's "- A -> B" table lines and steps (session 20's fix; runs 1-8 trained on "A -> B"),
# everything else as run 8, for what is left of 565 s.
# The target and the draft come back under $OUT (target/ 4 files, draft.tar, train.log).
#   bash bench/gpu_run131.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
export PYTHONUNBUFFERED=1
T=$((565 - SECONDS))
echo "training for $T s"
OKV_BIN=build-gc2/oasiskv OKV_TRAIN_ARGS="--workers 14" bash train/run_gpu.sh /tmp/tr $T 0 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/target && cp /tmp/tr/target/* $OUT/target/ && tar -C /tmp/tr -cf $OUT/draft.tar draft && ls -la $OUT/target $OUT/draft.tar
