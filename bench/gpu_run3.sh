#!/bin/bash
# GPU session of 2026-11-29 (3): tensor-parallel tests, the CUDA suite, the sparse
# pipeline A/B (OKV_DEFER_INSTALL) and the first training run of the evaluation models.
#   bash bench/gpu_run3.sh [train seconds]      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader > $L/gpu.txt 2>&1
for t in test_cuda_tp test_cuda_engine test_cuda_ops; do
  s=$(date +%s); timeout 150 build-gc/tests/$t > $L/$t.log 2>&1; rc=$?
  echo "$t: exit $rc ($(( $(date +%s) - s )) s) $(grep -E 'checks' $L/$t.log | tail -1)" >> $L/summary.txt
done
for d in 0 1; do
  OKV_DEFER_INSTALL=$d timeout 100 build-gc/bench/bench_step --config bench/configs/smollm2-135m --device cuda \
    --batch 1,16,64 --ctx 8192 --kv-budget dense,2048 --steps 10 --warmup 3 > $L/step_defer$d.txt 2>&1
  echo "bench_step defer=$d: exit $?" >> $L/summary.txt
done
OKV_BIN=build-gc/oasiskv timeout 560 train/run_gpu.sh /tmp/tr "${1:-400}" 0 > $L/train.log 2>&1
echo "train: exit $?" >> $L/summary.txt
tail -c 6000 $L/train.log
(cd /tmp/tr && tar cf $OUT/target.tar target && tar cf $OUT/draft.tar draft)
tar cf $OUT/logs.tar -C $L .
echo ==== ; cat $L/gpu.txt $L/summary.txt; grep -E "FAIL" $L/test_cuda_tp.log | head -5; cat $L/step_defer0.txt $L/step_defer1.txt | grep "^|"
