# Sourced (not run) by the training calls' scripts after they save the weights, so that SECONDS counts
# the whole call: the engine's dense accuracy at 32K on the evaluation's texts, N = 40 a family (as
# bench/gpu_run165.sh's group A dense cells; ~0.25 s a sample on the H200, ~55-75 s), then, in what the
# call has left (until END, default 580 s), the selection to recommend (layer-ahead, 2-bit codes, serve
# defaults) at 1024: run 14 kept 218 of its 218 there, run 15 234 of 236 (bench/ACCURACY.md).
# $OUT/dense32k.json, and one JSON a family packed into $OUT/la.tgz (a call returns at most 8 files).
#   EVAL_MODEL=/tmp/tr/target . bench/gpu_eval32k.sh      (after . bench/gpu_env.sh, which sets $B)
timeout 150 $B/oasiskv eval --sweep --model $EVAL_MODEL --context-len 32768 --num-samples ${EVAL_N:-40} --seed 0 \
  --device cuda --task niah_single_text,niah_multikey,niah_multivalue,niah_multiquery,vt,qa,chain --kv-budget dense \
  --json $OUT/dense32k.json 2>&1 | grep -v "^\[eval\].*sample" | tail -12
mkdir -p /tmp/la
for t in niah_multivalue niah_multiquery chain vt qa niah_single_text niah_multikey; do
  left=$((${END:-580} - SECONDS)); [ $left -gt 25 ] || { echo "layer-ahead $t: no time"; continue; }
  timeout $left $B/oasiskv eval --sweep --model $EVAL_MODEL --context-len 32768 --num-samples ${EVAL_N:-40} --seed 0 \
    --device cuda --task $t --kv-budget 1024 --predict layer-ahead --kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25 \
    --json /tmp/la/$t.json 2>&1 | grep "^| [a-z]" | grep -v "^| task"
done
tar -C /tmp -czf $OUT/la.tgz la
