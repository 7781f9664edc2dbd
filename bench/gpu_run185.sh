#!/bin/bash
# Session 43 of 2026-12-07: why the server's draft gate still drafts at c64 (gpu_run183, H100: c64 no drafts
# 45,804 / 45,901 tok/s, adaptive 37,297 / 37,143 with 1,280 steps of which 1,055 overlapped; c16 20,766 against
# 25,716): the gate's debug lines (its two measured rates per batch size) at c64; and the CUDA tests, one binary
# after another in the background (the code moved in sessions 38-42 without a GPU).
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run185.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
nvidia-smi --query-gpu=name --format=csv,noheader
T=${M16:-train/checkpoints/run16}
TD=/tmp/okv_tests; mkdir -p $TD
(
  for t in $B/tests/test_cuda_resid $B/tests/test_cuda_ops $B/tests/test_cuda_engine $B/tests/test_cuda_graph \
           $B/tests/test_prefix $B/tests/test_sched $B/tests/test_dense_room $B/tests/test_cuda_tp; do
    n=$(basename $t); s=$(date +%s)
    timeout 200 $t > $TD/$n.log 2>&1; rc=$?
    echo "$n: exit $rc ($(( $(date +%s) - s )) s) $(grep -E "checks" $TD/$n.log | tail -1)" >> $TD/summary.txt
  done
  nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv >> $TD/summary.txt 2>&1
) &
tests=$!
L=/tmp/okv_logs185; mkdir -p $L
bash bench/make_text_prompts.sh $B/oasiskv $T/target 4096 128 /tmp/p4k.jsonl
port=37000
for v in "adaptive8|--draft ngram --spec-tokens 8 --spec-adaptive" "ngram2|--draft ngram --spec-tokens 2"; do
  port=$((port + 100))
  OKV_LOG_LEVEL=debug TAG=${v%%|*} KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=2 MAX_DURATION=40 \
    CTX=$((4096 + 1024 + 64)) timeout 60 bash bench/serve_ab.sh build-gc "-m $T/target" 2 4000 1024 64 2048 \
    "--device cuda --kv-key-codes 2 ${v#*|}" >> $L/serve.md 2>&1
  echo "${v%%|*} c64: $(tail -1 $L/serve.md)"
  grep -h "steps_total\|steps_overlapped\|spec_decode_num_drafts_total" $L/metrics_${v%%|*}_2048_c64.txt | grep -v "^#"
  grep -h "drafted steps" $L/serve_${v%%|*}_2048_c64.log | head -30
done 2>&1 | tee $OUT/serve.md
wait $tests
cp $TD/*.log $OUT/ 2>/dev/null
cat $TD/summary.txt | tee $OUT/summary.txt
grep -h "FAIL" $TD/*.log | head -30
echo "done at $SECONDS s"
