#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: after the review of overlapped decoding (attention plans
# staged through the ring instead of one pinned buffer waited on per plan; a queued step without
# logit rows collected like others). (1) test_cuda_ops, test_cuda_engine, test_cuda_graph,
# test_prefix, test_sched; (2) the reasoning shape at c64 (gpu_run93.sh): budget 2048 fp8 and dense.
#   bash bench/gpu_run96.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
for t in cuda_ops cuda_engine cuda_graph prefix sched; do
  timeout 200 build-gc/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
grep -h "FAIL\|queued step failed" $OUT/*.txt | head -8
L=/tmp/okv_logs96; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
port=27000
for v in "2048:--device cuda --kv-host-dtype fp8:fp8" "dense:--device cuda:dense"; do
  kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
  port=$((port + 100))
  TAG=reason_s15b_$tag KVS=$kv PORT0=$port DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
    PROMPTS_PER_SLOT=1 timeout 120 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 64 \
    2048 "$extra" >> $L/serve_reason.md 2>&1
  echo "$tag: $(tail -1 $L/serve_reason.md)"
  grep -h "queued step failed" $L/serve/serve_reason_s15b_${tag}_*.log | head -2
done
cp $L/serve_reason.md $OUT/
