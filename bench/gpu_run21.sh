#!/bin/bash
# GPU session of 2026-11-29 (6), one H200. (1) test_cuda_resid / test_cuda_engine after the
# candidate table (select_install no longer uploads every candidate list every layer),
# test_cuda_engine again with OKV_GATHER_SMS=16 (green contexts); (2) the sparse step of the
# trained target at 28K, batch 128, against the gather's contention: gather CTAs 32 (default)
# / 8 / 4, SM partitions OKV_GATHER_SMS=8 / 16, cache factor 2; (3) the text-prompt serving
# run at c256 with cache factor 2 and the fastest gather setting of (2).
#   bash bench/gpu_run21.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs21; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_resid test_cuda_engine; do
  timeout 100 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
OKV_GATHER_SMS=16 timeout 100 build-gc/tests/test_cuda_engine > $L/test_cuda_engine_green16.txt 2>&1
echo "test_cuda_engine (OKV_GATHER_SMS=16): exit $? $(tail -1 $L/test_cuda_engine_green16.txt)" | tee -a $L/summary.txt
grep -h "SMs for\|cannot split" $L/test_cuda_engine_green16.txt | head -2
grep -E "^FAIL" $L/*.txt | head
save
best=""; best_ms=1e9
for v in "OKV_FETCH_CTAS=32" "OKV_FETCH_CTAS=8" "OKV_FETCH_CTAS=4" "OKV_GATHER_SMS=8" "OKV_GATHER_SMS=16" "OKV_FETCH_CTAS=8 OKV_GATHER_SMS=8"; do
  for cf in 1 2; do
    [ $cf = 2 ] && [ "$v" != "OKV_FETCH_CTAS=32" ] && continue
    f=$L/step_b128_$(echo $v | tr ' =' '__')_cf$cf.txt
    env $v OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 128 \
      --ctx 28672 --kv-budget 2048 --steps 10 --warmup 3 --cache-factor $cf > $f 2>&1
    ms=$(grep "^| 128 |" $f | awk -F'|' '{print $5}' | tr -d ' ')
    echo "== $v cache factor $cf: step $ms ms"; grep -A14 "OKV_CUDA_PROFILE:" $f | grep -E "PROFILE|matmul|rmsnorm|attention|select_install|swiglu"
    if [ $cf = 1 ] && [ -n "$ms" ] && awk "BEGIN{exit !($ms < $best_ms)}"; then best="$v"; best_ms=$ms; fi
  done
done
echo "fastest gather setting: $best ($best_ms ms)" | tee -a $L/summary.txt
save
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
env $best TAG=text_cf2_best KVS=2048 PORT0=18700 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout ${SERVE_S:-170} bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
  "--device cuda --kv-cache-factor 2" >> $L/serve_text_best.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
cat $L/serve_text_best.md
grep -h "oasiskv:\(fetch_bytes\|resident\|stall\|engine_steps\|step_host\)" $L/serve/metrics_*.txt | grep -v "^#"
save
