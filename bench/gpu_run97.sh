#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: overlapped decoding now also in steps with prefill
# chunks and admissions. test_sched and test_prefix (CUDA parts), then the long-text shape
# (gpu_run94.sh) with budget 2048 and the fp8 host tier at c256.
#   bash bench/gpu_run97.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
for t in sched prefix; do
  timeout 100 build-gc/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
grep -h "FAIL\|queued step failed" $OUT/*.txt | head -8
L=/tmp/okv_logs97; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
TAG=text_s15c_fp8 KVS=2048 PORT0=28500 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout 130 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
  "--device cuda --kv-host-dtype fp8" >> $L/serve_text.md 2>&1
echo "text c256 fp8: $(tail -1 $L/serve_text.md)"
m=$(ls $L/serve/metrics_text_s15c_fp8_*c256.txt 2>/dev/null | head -1)
[ -n "$m" ] && grep -E "^oasiskv:(steps_overlapped_total|engine_steps_total|resident_in_time_ratio)" $m
grep -h "queued step failed" $L/serve/*.log | head -2
cp $L/serve_text.md $OUT/
