#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: overlapped decoding in serving. (1) test_sched with
# its CUDA part (every request a slot from the start); (2) the reasoning shape of section 17/19
# (~1K-token English prompts, 16384 output tokens, c64, 2 GiB pool, serve defaults): budget 2048
# with the fp8 host tier, with and without --no-async-scheduling, and dense (async).
#   bash bench/gpu_run93.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
timeout 200 build-gc/tests/test_sched > $OUT/sched.txt 2>&1; echo "sched exit $? $(tail -1 $OUT/sched.txt)"
grep -h "FAIL\|cuda)" $OUT/sched.txt | head -8
L=/tmp/okv_logs93; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
port=27000
for v in "2048:--device cuda --kv-host-dtype fp8:fp8_async" "2048:--device cuda --kv-host-dtype fp8 --no-async-scheduling:fp8_sync" \
         "dense:--device cuda:dense_async"; do
  kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
  port=$((port + 100))
  TAG=reason_s15_$tag KVS=$kv PORT0=$port DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
    PROMPTS_PER_SLOT=1 timeout 160 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 64 \
    2048 "$extra" >> $L/serve_reason.md 2>&1
  echo "$tag: $(tail -1 $L/serve_reason.md)"
  m=$(ls $L/serve/metrics_reason_s15_${tag}_*c64.txt 2>/dev/null | head -1)
  [ -n "$m" ] && grep -E "^oasiskv:steps_overlapped_total|^vllm:.*steps|^oasiskv:engine_steps_total" $m | head -3
done
cp $L/serve_reason.md $OUT/
