#!/bin/bash
# GPU session of 2026-11-29 (5), one H200. (1) The CUDA tests with this build's defaults
# (prefill kernel on) and with OKV_STEP_SYNC=compute; (2) serving A/B with real weights:
# the project's trained target (train/checkpoints/run3/target: 8 layers, 2 KV heads,
# 32K context) at ~31K-token prompts, 256 output tokens, 2 GiB device pool, concurrency
# 1/16/64/256, dense vs --kv-budget 2048; (3) bench_step's host columns on the 8B shape
# and the attention kernels re-timed after the mma_qk change (gpu_run13's timing part).
#   bash bench/gpu_run14.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs14; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $L/gpu.txt
for t in test_cuda_engine test_cuda_ops test_cuda_tp; do
  timeout 120 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -iE "FAIL" $L/test_cuda_engine.txt | head -10
OKV_STEP_SYNC=compute timeout 120 build-gc/tests/test_cuda_engine > $L/test_cuda_engine_sync_compute.txt 2>&1
echo "test_cuda_engine, OKV_STEP_SYNC=compute: exit $? $(tail -1 $L/test_cuda_engine_sync_compute.txt)" | tee -a $L/summary.txt
save
OUT=$L/serve_trained CTX=32768 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-290} bash bench/serve_ab.sh build-gc \
  "-m train/checkpoints/run3/target" 2 26500 256 "${CONCS:-1 16 64 256}" 2048 \
  "--device cuda --kv-host-gb 40" > $L/serve_trained_32k.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
cat $L/serve_trained_32k.md $L/serve_trained/startup.txt
save
timeout 60 build-gc/bench/cuda_attention --ctx 8192,32768 > $L/attn_decode.txt 2>&1; tail -12 $L/attn_decode.txt
timeout 30 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 > $L/attn_prefill.txt 2>&1; tail -5 $L/attn_prefill.txt
save
timeout 90 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 16,64 --ctx 8192 \
  --kv-budget dense,2048 --steps 8 --warmup 2 > $L/step_8b.md 2>&1; cat $L/step_8b.md
save
OKV_STEP_SYNC=compute timeout 45 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 16,64 \
  --ctx 8192 --kv-budget 2048 --steps 8 --warmup 2 > $L/step_8b_sync_compute.md 2>&1
echo "OKV_STEP_SYNC=compute:"; tail -3 $L/step_8b_sync_compute.md
save
