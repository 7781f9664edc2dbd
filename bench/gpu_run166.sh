#!/bin/bash
# GPU session of 2026-12-03 (30), one H200: training run 12 = run 11 (train/checkpoints/run11) trained on
# for one call at its last phase (2K / 16K / 32K by steps 1:1:4) with a lower rate decaying from the
# start (target 1e-3, draft 1.5e-3, --decay-share 1): run 11's decaying finish was still raising the weak
# families when it stopped (training-batch exact match, multi-value 0.21 -> 0.47, qa 0.29 -> 0.52, chain
# 0.30 -> 0.57 in 170 s). Task weights: single text back to 1 (run 11's 0.5 lost single text on the
# evaluation's haystacks at 32K, 4/8), the weak families 2.5. Reports at 32K (held-out, 12 a family).
#   bash bench/gpu_run166.sh [BUDGET]     (carry build-gc; target/, draft.tar, train.log under $OUT)
set -u
BUDGET=${1:-540}
. bench/gpu_env.sh build-gc
export PYTHONUNBUFFERED=1
CUR="0:2048=1,16384=1,32768=4"
TW="niah_single_text=1,niah_single_filler=0.25,niah_multikey=0.75,niah_multivalue=2.5,niah_multiquery=1,vt=0.75,qa=2.5,chain=2.5"
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14 --curriculum $CUR --task-weights $TW --lr 1e-3 --draft-lr 1.5e-3 --decay-share 1 --report-ctx 32768 --report-samples 12" \
    bash train/run_gpu.sh /tmp/tr $((BUDGET - SECONDS)) 0 train/checkpoints/run11 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/target && cp /tmp/tr/target/* $OUT/target/ && tar -C /tmp/tr -cf $OUT/draft.tar draft && ls -la $OUT/target $OUT/draft.tar
