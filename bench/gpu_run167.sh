#!/bin/bash
# Planned in session 30 of 2026-12-03 (not run): training run 13 from scratch in three calls of under 10
# minutes that make one schedule (train.py --span), each resuming from the last call's weights, so that a
# machine given back between calls loses nothing (session 29 lost a continuous run that way). What runs
# 11-12 taught: every family is learned at 512-2K within ~4 minutes at 2e-3; the 16K/32K phase at a
# constant 2e-3 drags the weak families down, a rate decaying through it (run 12: 1e-3 to 0 over 507 s)
# raises them (teacher-forced at 32K 78 -> 83 of 96); single text at run 11's weight 0.5 lost the license
# haystack (engine, 32K: 24/40, run 10 at weight 1: 38/40). So: run 11's curriculum (train.py's
# default), the rate decaying linearly from 50% (where 2K/16K/32K begins; --decay-share 0.5), single text
# weighed 1, qa and chain 2.5.
#   bash bench/gpu_run167.sh 1             (carry build-gc; from scratch, shares 0-0.34; $OUT/r/{target,draft.tar})
#   bash bench/gpu_run167.sh 2 train/r13a  (the first call's weights unpacked at train/r13a: target/ + draft/)
#   bash bench/gpu_run167.sh 3 train/r13b  (the last: the rate's decay ends, the 32K report)
# Between calls: mkdir -p train/r13a && cp -r FILES_AT/r/target train/r13a/ && tar -C train/r13a -xf
# FILES_AT/r/draft.tar (untracked, travels with the tree; ~16.6 MB: the tree stays under 64 MiB with
# run10 + run12 + build-gc).
set -u
CHUNK=${1:?chunk 1, 2 or 3}
RESUME=${2:-}
BUDGET=${BUDGET:-565}
. bench/gpu_env.sh build-gc
export PYTHONUNBUFFERED=1
TW="niah_single_text=1,niah_single_filler=0.25,niah_multikey=1,niah_multivalue=2,niah_multiquery=1.5,vt=0.75,qa=2.5,chain=2.5"
case $CHUNK in
  1) SPAN=0:0.34; REP="--report-ctx 8192 --report-samples 4" ;;
  2) SPAN=0.34:0.67; REP="--report-ctx 32768 --report-samples 4" ;;
  3) SPAN=0.67:1; REP="--report-ctx 32768 --report-samples 12" ;;
  *) echo "chunk: 1, 2 or 3"; exit 2 ;;
esac
[ "$CHUNK" = 1 ] || [ -f "$RESUME/target/model.safetensors" ] || { echo "chunk $CHUNK: no weights at '$RESUME'"; exit 2; }
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14 --span $SPAN --phase-scale 1 --decay-share 0.5 --task-weights $TW $REP" \
    bash train/run_gpu.sh /tmp/tr $((BUDGET - SECONDS)) 0 $RESUME 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/r/target && cp /tmp/tr/target/* $OUT/r/target/ && tar -C /tmp/tr -cf $OUT/r/draft.tar draft && ls -la $OUT/r/target $OUT/r/draft.tar
