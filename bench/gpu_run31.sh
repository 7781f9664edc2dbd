#!/bin/bash
# GPU session of 2026-11-29 (7), one H200, last minutes: OKV_STEP_SYNC=compute (a step's
# final sync leaves the copy stream's gathers running into the next step) with CUDA graphs
# on: test_cuda_engine and test_cuda_graph under it; bench_step of the trained target, 28K,
# batch 128, budget 2048 (cache factor 2, sticky 0.25), both syncs; serving English text at
# c256 (sparse only: dense has no copy-stream work) under it, against gpu_run28's 12059 tok/s.
#   bash bench/gpu_run31.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs31; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_engine test_cuda_graph; do
  OKV_STEP_SYNC=compute timeout 100 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t (sync compute): exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -hE "^FAIL" $L/*.txt | head
save
for ss in both compute; do
  OKV_STEP_SYNC=$ss timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 128 \
    --ctx 28672 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --steps 10 --warmup 3 > $L/step_b128_sync_$ss.txt 2>&1
  echo "sync $ss: $(grep '^| 128 |' $L/step_b128_sync_$ss.txt)"
done
save
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
OKV_STEP_SYNC=compute TAG=text_sync_compute KVS=2048 PORT0=25000 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout ${SERVE_S:-150} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
  "--device cuda" >> $L/serve.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
tail -1 $L/serve.md; save
