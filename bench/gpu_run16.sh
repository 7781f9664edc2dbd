#!/bin/bash
# GPU session of 2026-11-29 (5), one H200: device-side residency (cuda_resid.cu).
# (1) tests: test_cuda_resid (against resid.c), test_cuda_engine (incl. device vs host
# maps), test_cuda_ops, test_cuda_tp; (2) bench_step A/B, device maps vs host maps
# (OKV_DEVICE_RESID=0), on the trained target (real weights, 8 layers, 2 KV heads) at
# 28K and on the 8B shape at 8K; (3) the decode-heavy serving run of the trained target
# (24000-token random prompts, 4096 output tokens, 2 GiB pool) with device maps.
#   bash bench/gpu_run16.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs16; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_resid test_cuda_engine test_cuda_ops test_cuda_tp; do
  timeout 120 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -E "FAIL|device vs host|gathered" $L/test_cuda_resid.txt $L/test_cuda_engine.txt | head -30
save
for dr in 1 0; do
  OKV_DEVICE_RESID=$dr timeout 90 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 16,64,128 \
    --ctx 28672 --kv-budget $([ $dr = 1 ] && echo dense,2048 || echo 2048) --steps 10 --warmup 3 > $L/step_trained_dr$dr.md 2>&1
  echo "OKV_DEVICE_RESID=$dr"; cat $L/step_trained_dr$dr.md
  OKV_DEVICE_RESID=$dr timeout 80 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 16,64 \
    --ctx 8192 --kv-budget 2048 --steps 8 --warmup 2 > $L/step_8b_dr$dr.md 2>&1
  tail -2 $L/step_8b_dr$dr.md
  save
done
KVS=2048 OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-230} bash bench/serve_ab.sh build-gc \
  "-m train/checkpoints/run3/target" 2 24000 4096 "${CONCS:-16 64 128}" 2048 "--device cuda" > $L/serve_trained_out4096.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
cat $L/serve_trained_out4096.md
grep -h "oasiskv:\(fetch_bytes\|blocks_fetched\|resident\|stall\)" $L/serve/metrics_*.txt | grep -v "^#" | head -20
save
