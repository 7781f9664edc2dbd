#!/bin/bash
# Prepared for the next GPU session (one H200); not yet run. Why compute slows 4-8x while the
# host-tier gather runs (bench/RESULTS.md section 11): cuda_gather --contend times a
# bandwidth-bound GEMM, a launch-bound small GEMM and a residual add alone and beside 32 MiB
# gathers of 4 and 16 KiB units with 4-64 CTAs; then bench_step of the trained target at 28K,
# batch 128, budget 2048 (serve defaults: cache factor 2, sticky 0.25) with OKV_FETCH_CTAS
# 16 / 32 (default cap) / 64.
#   bash bench/gpu_run32.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs32; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
timeout 240 build-gc/bench/cuda_gather --calls 40 --contend > $L/cuda_gather_contend.txt 2>&1
echo "cuda_gather: exit $?"; sed -n '/compute beside/,$p' $L/cuda_gather_contend.txt
save
for fc in 16 32 64; do
  OKV_FETCH_CTAS=$fc timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 128 \
    --ctx 28672 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --steps 10 --warmup 3 > $L/step_b128_ctas$fc.txt 2>&1
  echo "fetch CTAs $fc: $(grep '^| 128 |' $L/step_b128_ctas$fc.txt)"
done
save
