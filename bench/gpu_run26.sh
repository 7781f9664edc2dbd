#!/bin/bash
# Prepared for the next GPU session (one H200); not yet run. (1) The CUDA tests after the
# sticky cut in cuda_resid.cu (test_cuda_resid: three sticky cases against okv_sel_sticky +
# resid.c; test_cuda_engine; test_cuda_tp after the lists' version reaches the ranks) and the
# candidate table's high-water mark; (2) bench_step of the trained target at 28K, batch 128,
# cache factor 2, --sticky 0 / 0.25 / 0.5 (fetched MiB per step and step time); (3) the
# text-prompt serving run at c256 (2 GiB pool, budget 2048, 4096 output tokens) with
# --kv-sticky 0.25 and 0.5 (default cache factor 2), against gpu_run22's 10698 tok/s without.
#   bash bench/gpu_run26.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs26; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_resid test_cuda_engine test_cuda_tp; do
  timeout 120 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -E "^FAIL" $L/*.txt | head
save
for sk in 0 0.25 0.5; do
  timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 128 --ctx 28672 \
    --kv-budget 2048 --steps 10 --warmup 3 --cache-factor 2 --sticky $sk > $L/step_b128_cf2_sticky$sk.txt 2>&1
  echo "sticky $sk: $(grep '^| 128 |' $L/step_b128_cf2_sticky$sk.txt)"
done
save
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
port=21000
for sk in 0.5 0.25; do
  port=$((port + 100))
  TAG=text_sticky$sk KVS=2048 PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
    timeout ${SERVE_S:-170} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
    "--device cuda --kv-sticky $sk" >> $L/serve_text_sticky.md 2>&1
  pkill -f "oasiskv serve" 2>/dev/null; sleep 1
  tail -1 $L/serve_text_sticky.md; save
done
for f in $L/serve/metrics_*.txt; do echo "$f"; grep -h "oasiskv:\(fetch_bytes\|resident\|stall\|engine_steps\)" $f | grep -v "^#"; done
save
