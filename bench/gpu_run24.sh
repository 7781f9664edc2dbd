#!/bin/bash
# GPU session of 2026-11-29 (6), one H200, last few minutes: test_cuda_engine after the
# attention lists' version (dense lists of a step reused without comparing them), and the
# dense step of the trained target at 28K, batch 16 / 128 (host time per op category).
#   bash bench/gpu_run24.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs24; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
timeout 100 build-gc/tests/test_cuda_engine > $L/test_cuda_engine.txt 2>&1
echo "test_cuda_engine: exit $? $(tail -1 $L/test_cuda_engine.txt)" | tee -a $L/summary.txt
grep -E "^FAIL" $L/*.txt | head
save
for b in 16 128; do
  OKV_CUDA_PROFILE=1 timeout 40 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b \
    --ctx 28672 --kv-budget dense --steps 10 --warmup 3 > $L/prof_dense_b$b.txt 2>&1
  echo "== dense batch $b"; grep "^| $b |" $L/prof_dense_b$b.txt; grep -A12 "OKV_CUDA_PROFILE:" $L/prof_dense_b$b.txt | grep -E "PROFILE|matmul|attention|sample"
done
save
