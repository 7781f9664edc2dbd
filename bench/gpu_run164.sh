#!/bin/bash
# GPU session of 2026-12-03 (29), one H200: the end of training run 11. The machine of
# gpu_run163.sh went back between its second and third calls (the continuous run stopped at
# ~1100 s), so run 11 resumes from the second snapshot (train/r11snap = snap_1100, untracked,
# travels with the tree; train/checkpoints/run3 moved out for the call to stay under the carry
# limit) at its last phase for what is left of BUDGET seconds, the learning rate decaying
# linearly from the start (--decay-share 1), and reports at 32K.
#   bash bench/gpu_run164.sh [BUDGET]     (carry build-gc; target/, draft.tar, train.log under $OUT)
set -u
BUDGET=${1:-230}
. bench/gpu_env.sh build-gc
export PYTHONUNBUFFERED=1
CUR="0:512=1;0.2:512=1,1024=1,2048=1;0.35:2048=1,4096=1,8192=1;0.42:8192=1,16384=1;0.5:2048=1,16384=1,32768=4"
TW="niah_single_text=0.5,niah_single_filler=0.25,niah_multikey=1,niah_multivalue=2,niah_multiquery=1.5,vt=0.75,qa=2,chain=2"
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14 --curriculum $CUR --task-weights $TW --decay-share 1 --report-ctx 32768 --report-samples 12" \
    bash train/run_gpu.sh /tmp/tr $((BUDGET - SECONDS)) 0 train/r11snap 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/target && cp /tmp/tr/target/* $OUT/target/ && tar -C /tmp/tr -cf $OUT/draft.tar draft && ls -la $OUT/target $OUT/draft.tar
