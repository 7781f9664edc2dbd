#!/bin/bash
# GPU session of 2026-11-29 (6), one H200. (1) Where a sparse step's time goes at batch 128
# (OKV_CUDA_PROFILE=1 after the profiler's fixes: warm-up steps left out, host time per op
# category beside the GPU time); (2) churn on real text: the decode-heavy serving run of the
# trained target at c256 (2 GiB pool, --kv-budget 2048, 4096 output tokens) with prompts of
# English text (niah_single_text samples at 28672 tokens, ~28.6K prompt tokens) instead of
# random words: sparse with --kv-cache-factor 1 and 2, then dense.
#   bash bench/gpu_run20.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs20; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for b in 128; do
  for kv in dense 2048; do
    OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b \
      --ctx 28672 --kv-budget $kv --steps 10 --warmup 3 > $L/prof_trained_b${b}_$kv.txt 2>&1
    echo "== trained 28K batch $b $kv"; tail -15 $L/prof_trained_b${b}_$kv.txt
  done
done
save
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
run() {   # TAG KV PORT0 EXTRA
  TAG=$1 KVS=$2 PORT0=$3 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
    timeout ${SERVE_S:-165} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
    "--device cuda $4" >> $L/serve_text_out4096.md 2>&1
  pkill -f "oasiskv serve" 2>/dev/null; sleep 1
  tail -1 $L/serve_text_out4096.md; save
}
run text_cf1 2048 18400 ""
run text_cf2 2048 18500 "--kv-cache-factor 2"
run text dense 18600 ""
grep -h "holds" $L/serve/serve_*.log | head -3
grep -h "oasiskv:\(fetch_bytes\|resident\|stall\|engine_steps\)" $L/serve/metrics_*.txt | grep -v "^#"
save
