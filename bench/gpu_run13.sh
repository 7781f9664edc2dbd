#!/bin/bash
# Prepared for the next GPU session (one H200): (1) the CUDA tests with this build's
# defaults (the prefill kernel on: test_cuda_engine has not yet run with it); (2) where a
# sparse step's time goes: bench_step's host columns (issue time, of which sparse
# bookkeeping and lists, final sync wait) on the 8B and SmolLM2 shapes; (3) the same
# with OKV_STEP_SYNC=compute (a step's final sync leaves the copy stream running, so
# the last layers' fetches overlap the next step): test_cuda_engine and bench_step A/B.
#   bash bench/gpu_run13.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs13; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_engine test_cuda_ops test_cuda_tp; do
  timeout 150 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -iE "FAIL" $L/test_cuda_engine.txt | head -10
OKV_STEP_SYNC=compute timeout 150 build-gc/tests/test_cuda_engine > $L/test_cuda_engine_sync_compute.txt 2>&1
echo "test_cuda_engine, OKV_STEP_SYNC=compute: exit $? $(tail -1 $L/test_cuda_engine_sync_compute.txt)" | tee -a $L/summary.txt
save
# the attention kernels now share their Q K^T tile loop (cuda_mma.cuh: mma_qk): same
# registers, but the decode kernel's code for head_dim 64 / 96 was rescheduled; check its
# bandwidth against bench/results/h200_cuda_attention.txt and the prefill kernel's speed
timeout 120 build-gc/bench/cuda_attention --ctx 8192,32768 > $L/attn_decode.txt 2>&1; tail -12 $L/attn_decode.txt
timeout 60 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 > $L/attn_prefill.txt 2>&1; tail -5 $L/attn_prefill.txt
save
for cfg in llama3-8b smollm2-135m; do
  timeout 200 build-gc/bench/bench_step --config bench/configs/$cfg --device cuda --batch 1,16,64 --ctx 8192 \
    --kv-budget dense,2048 --steps 10 --warmup 3 > $L/step_$cfg.md 2>&1
  cat $L/step_$cfg.md
  OKV_STEP_SYNC=compute timeout 200 build-gc/bench/bench_step --config bench/configs/$cfg --device cuda --batch 16,64 \
    --ctx 8192 --kv-budget 2048 --steps 10 --warmup 3 > $L/step_${cfg}_sync_compute.md 2>&1
  echo "OKV_STEP_SYNC=compute:"; tail -2 $L/step_${cfg}_sync_compute.md
  save
done
