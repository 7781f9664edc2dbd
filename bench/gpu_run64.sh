#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: Quest's bound with one lane per candidate
# (quest_lane_k). The CUDA tests, the selection times against quest_k, then the reasoning shape
# with the bound (serve defaults) at c64 and c128 x 16384 (session 10: 31955 and 33176 tok/s).
#   bash bench/gpu_run64.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
for t in ops engine resid; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL|score [0-9]|exact data" $OUT/ops.txt | head -6
grep -E "select perf|quest_k, OKV|codes_k, OKV" $OUT/ops.txt
L=/tmp/okv_logs64; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
for c in 64 128; do
  TAG=reason_questlane_o16384 KVS=2048 PORT0=$((27400 + c)) DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
    PROMPTS_PER_SLOT=1 timeout 200 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 $c \
    2048 "--device cuda" >> $L/serve.md 2>&1
  tail -1 $L/serve.md
done
tar cf $OUT/logs.tar -C $L .
