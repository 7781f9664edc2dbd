#!/bin/bash
# GPU session of 2026-11-29 (6), one H200: test_cuda_engine with the new check that the
# device-size estimate (serve --kv-pool-gb sizing) covers the residency state (cache factors
# 1-3), test_cuda_resid; then the text-prompt serving run at c256 with --kv-cache-factor 1.5
# (it failed to start in gpu_run22: the estimate missed the candidate and item tables).
#   bash bench/gpu_run23.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs23; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_engine test_cuda_resid; do
  timeout 100 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -E "^FAIL" $L/*.txt | head
save
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
TAG=text_cf1.5 KVS=2048 PORT0=19500 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout ${SERVE_S:-170} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
  "--device cuda --kv-cache-factor 1.5" >> $L/serve_text_cf15.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
cat $L/serve_text_cf15.md; grep -h "holds\|trying" $L/serve/serve_*.log
grep -h "oasiskv:\(fetch_bytes\|resident\|stall\|engine_steps\)" $L/serve/metrics_*.txt | grep -v "^#"
save
