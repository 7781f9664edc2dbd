#!/bin/bash
# Session 33 of 2026-12-04: why multi-value stays low, and the 32K matrix of run 14.
# Run 14 writes 3 of 4 values in most failed multi-value samples at 32K (28 of 40 wrong, 24 of them at
# partial 0.75), the missing one replaced by a repeat of the value just written; in training batches its
# answer loss ends at ~0.08 a token (~2.8 nats a sample, about ln 4! = 3.2: the set known, the order not)
# while its exact rate stays at 0.21. The reference lists the values in the text's order. This asks
# whether another order is easier to learn: three fine-tunes of run 14 on multi-value alone, in
# parallel on the one GPU, the same seed and time, each with one order of the reference
# (OKV_MV_ORDER, src/eval/eval_tasks.c): doc (the text's, as now), drawn (the generator's, random
# against the text), sorted (ascending); then the engine's greedy accuracy (scored as a set) at 2K and
# 32K, N = 40 each.
#   bash bench/gpu_run169.sh mvx        (carry build-gc, build-texts; MVS=seconds of training, default 300)
# A matrix group of bench/gpu_run165.sh runs beside it when MGROUPS is set (accuracy only, so sharing
# the GPU changes no result).
# ft: run 14 trained on for one more call on every family, multi-value's reference sorted (the mvx
# result), at mvx's contexts; the matrix group MGROUPS of run 14 beside it; then the engine's dense
# accuracy at 32K, N = 40 a family, of the result. Outputs packed (a call returns at most 8 files).
#   MGROUPS=B FTS=270 bash bench/gpu_run169.sh ft
# Ran in session 33 (bench/results/h200_s33/): MGROUPS=A first, whose fine-tunes never started (the matrix's
# gpu_env.sh unpacked the build again while run_gpu.sh looked for it; gpu_env.sh now unpacks it once, under a lock,
# then MGROUPS=L MVS=300 ... mvx (481 s), then MGROUPS=B END=420 FTS=270 ... ft (414 s); the
# matrix's C group and the rest of B in a fourth call (bench/gpu_run165.sh, 400 s). The calls set
# OKV_MV_ORDER themselves; train.py's --mv-order (since) passes it to the sample generator, and the
# evaluation scores the values as a set, whatever their order.
set -u
. bench/gpu_train_env.sh   # $B, $OUT, the texts in $TX
M0=${M0:-train/checkpoints/run14}
if [ -n "${MGROUPS:-}" ]; then
  (M=$M0 END=${END:-560} bash bench/gpu_run165.sh > $OUT/matrix.log 2>&1) &
fi
if [ "${1:-mvx}" = ft ]; then
  TW="niah_single_text=1,niah_single_filler=0.25,niah_multikey=1,niah_multivalue=6,niah_multiquery=1.5,vt=0.75,qa=2.5,chain=2.5"
  OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 12 --texts $TX --task-weights $TW --curriculum 0:2048=2,8192,32768 --lr 1e-3 --decay-share 0.5 --report-ctx 32768 --report-samples 8 --mv-order sorted" \
    bash train/run_gpu.sh /tmp/ft ${FTS:-270} 0 $M0 > $OUT/ft.log 2>&1
  grep -v " step " $OUT/ft.log | tail -8
  timeout 150 $B/oasiskv eval --sweep --model /tmp/ft/target --context-len 32768 --num-samples 40 --seed 0 --device cuda \
    --task niah_single_text,niah_multikey,niah_multivalue,niah_multiquery,vt,qa,chain --kv-budget dense \
    --json $OUT/ft_dense32k.json 2>&1 | grep "^| [a-z]"
  mkdir -p $OUT/r && cp -r /tmp/ft/target $OUT/r/ && tar -C /tmp/ft -cf $OUT/r/draft.tar draft
  wait; tar -C $OUT -czf $OUT/ftm.tgz ft.log ft_dense32k.json matrix.log matrix.tgz 2>/dev/null; rm -f $OUT/matrix.tgz
  cat $OUT/matrix.log; rm -f $OUT/ft.log $OUT/ft_dense32k.json $OUT/matrix.log; echo "done at $SECONDS s"; exit 0
fi
MVS=${MVS:-300}
for o in ${ORDERS:-doc drawn sorted}; do
  (OKV_BIN=build-gc/oasiskv OKV_TRAIN_ARGS="--workers 4 --texts $TX --tasks niah_multivalue --no-draft \
      --curriculum 0:2048=2,8192,32768 --lr 1e-3 --decay-share 0.5 --report-ctx 2048 --report-samples 12 --mv-order $o ${MVX_ARGS:-}" \
    bash train/run_gpu.sh /tmp/mv_$o $MVS 0 $M0 > $OUT/mv_$o.log 2>&1
   for L in 2048 32768; do
     timeout 120 $B/oasiskv eval --model /tmp/mv_$o/target --task niah_multivalue --context-len $L \
       --num-samples 40 --seed 0 --device cuda --kv-budget dense --json $OUT/mv_${o}_$L.json 2>&1 | grep "^| [a-z]" | sed "s/^/$o $L /"
   done) > $OUT/mv_${o}_eval.txt 2>&1 &
done
wait
grep -h "FINAL\|exact" $OUT/mv_*.log | grep -v " step " | tail -20
cat $OUT/mv_*_eval.txt
[ -n "${MGROUPS:-}" ] && cat $OUT/matrix.log
echo "done at $SECONDS s"
