#!/bin/bash
# Session 31 of 2026-12-03: training run 13 from scratch in three calls of under 10 minutes that make one
# schedule (train.py --span), each resuming from the last call's weights (gpu_run167's plan), with two
# changes:
#  - the haystack texts are ~6 times larger (train/make_texts.py now adds the prose of Python's and Perl's
#    manuals, Debian's python3-doc and perl-doc: 9.5 MB of training text against 1.5 MB of docstrings):
#    run 12 had learned its training texts by heart (language-model loss 4.4 nats on them, 7.0 on held-out
#    ones; run 10: 5.6 / 6.2; train/lm_loss.py), so that a memorised continuation could answer qa where a lookup was needed;
#  - text copy rows (--text-copy-frac 0.125): windows of the training texts in which spans of 16-48 tokens
#    repeat, loss on the repeats: the multi-token lookup that qa needs, densely supervised (random-token
#    copy rows, which a 2-token match finds, go from 1/8 of the rows to 1/16).
# The texts travel made (this machine's Python 3.11 and Debian 12's manuals; the GPU machine has neither
# package): tar -C /tmp/tx -cJf build-texts/okv_texts.tar.xz train heldout, after
# python3 train/make_texts.py /tmp/tx; carry build-texts and build-gc.
#   bash bench/gpu_run168.sh 1             ($OUT/r/{target,draft.tar})
#   bash bench/gpu_run168.sh 2 train/r13a  (the first call's weights unpacked at train/r13a: target/ + draft/)
#   bash bench/gpu_run168.sh 3 train/r13b  (the last: the rate's decay ends, the 32K report)
# Session 31's first call (chunk 1) lost its weights: a qa chunk at 1K that the generator could not make
# (one sample without a usable phrase in the new texts) was remade one sample at a time for 190 s, and the
# call ran out before copying the weights; train.py now splits such a chunk in halves. With the device time
# left, the same schedule ran in two calls instead (BUDGET=410 bash bench/gpu_run168.sh h1, then
# BUDGET=430 ... h2 train/r13a; the last call's engine eval below came after, so h2 ran without it).
# Between calls: mkdir -p train/r13a && cp -r FILES_AT/r/target train/r13a/ && tar -C train/r13a -xf
# FILES_AT/r/draft.tar (untracked, ~16.6 MB). The tracked tree holds three checkpoints since session 31:
# park them first (bash bench/park_checkpoints.sh keep NONE_OR_ONE, then back), to stay under the 64 MiB
# that a call carries with build-gc and build-texts.
# Session 32 of 2026-12-03 ran the three calls as written here (run 14, train/checkpoints/run14):
#   BUDGET=490 bash bench/gpu_run168.sh 1; BUDGET=480 ... 2 train/r13a; BUDGET=440 ... 3 train/r13b
# (today: MVO=doc before each of them, the reference order of runs 1-14; the default is now sorted)
# 450 + 441 + 393 = 1,283 s of training, 788M tokens, the third call weighing multi-value 4 (TW= overrides
# the weights); ~1,540 s of device time with the machine's start and the last call's 32K eval.
# Session 34 of 2026-12-04 ran them again with sorted multi-value references (run 15, train/checkpoints/run15):
#   BUDGET=490 bash bench/gpu_run168.sh 1; BUDGET=480 ... 2 train/r15a; BUDGET=440 ... 3 train/r15b
# 447 + 439 + 393 s of training, 760M tokens; engine dense at 32K, N = 40: 236/280 (run 14: 218);
# logs and JSON in bench/results/h200_s34/run15/.
set -u
CHUNK=${1:?chunk 1, 2 or 3}
RESUME=${2:-}
case ${1:-} in 3|h2) DEF=440 ;; *) DEF=500 ;; esac   # the last call keeps ~80 s for the engine's 32K eval
BUDGET=${BUDGET:-$DEF}
. bench/gpu_train_env.sh   # $B, $OUT, the texts in $TX
# multi-value's reference order (train.py --mv-order): sorted since session 33 (bench/gpu_run169.sh mvx);
# run 14 is MVO=doc, which also restores its multi-query weight (1.5). Multi-value weighs 4 in the last
# third (run 14: exact 0.02-0.06 at 32K when call 2 ended; run 15, sorted: 0.13-0.24, so session 34 set
# TW= with 4 in its call 3, now the default), multi-query (run 14: 0.675) 2.
MVO=${MVO:-sorted}
MV=2; MQ=2; [ "$CHUNK" = 3 ] && MV=4; [ "$MVO" = doc ] && MQ=1.5
TW=${TW:-"niah_single_text=1,niah_single_filler=0.25,niah_multikey=1,niah_multivalue=$MV,niah_multiquery=$MQ,vt=0.75,qa=2.5,chain=2.5"}
case $CHUNK in
  1) SPAN=0:0.34; REP="--report-ctx 8192 --report-samples 4" ;;
  2) SPAN=0.34:0.67; REP="--report-ctx 32768 --report-samples 4" ;;
  3) SPAN=0.67:1; REP="--report-ctx 32768 --report-samples 12" ;;
  h1) SPAN=0:0.5; REP="--report-ctx 8192 --report-samples 4" ;;      # the same schedule in two calls
  h2) SPAN=0.5:1; REP="--report-ctx 32768 --report-samples 12" ;;
  *) echo "chunk: 1, 2, 3 (or h1, h2)"; exit 2 ;;
esac
[ "$CHUNK" = 1 ] || [ "$CHUNK" = h1 ] || [ -f "$RESUME/target/model.safetensors" ] || { echo "chunk $CHUNK: no weights at '$RESUME'"; exit 2; }
OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 14 --texts $TX --text-copy-frac 0.125 --copy-frac 0.0625 --span $SPAN --phase-scale 1 --decay-share 0.5 --task-weights $TW --mv-order $MVO $REP" \
    bash train/run_gpu.sh /tmp/tr $((BUDGET - SECONDS)) 0 $RESUME 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/r/target && cp /tmp/tr/target/* $OUT/r/target/ && tar -C /tmp/tr -cf $OUT/r/draft.tar draft && ls -la $OUT/r/target $OUT/r/draft.tar
# the last call: the engine's dense accuracy at 32K and layer-ahead at 1024 (bench/gpu_eval32k.sh)
if [ "$CHUNK" = 3 ] || [ "$CHUNK" = h2 ]; then
  EVAL_MODEL=/tmp/tr/target . bench/gpu_eval32k.sh
fi
