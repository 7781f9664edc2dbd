#!/bin/bash
# Prepared for the next GPU session (one H200); not yet run. (1) The CUDA tests after the
# last session's tidy (shared bitonic sort, fetch-event helper, test_cuda_resid on the shared
# selection rules: compiled, not yet run on a GPU); (2) where a step's GPU time goes
# (OKV_CUDA_PROFILE=1, cuda_prof.cu: GPU ms per op category, span and gaps) for dense and
# sparse steps of the trained target at 28K (batch 16 / 64 / 128) and the 8B shape at 8K.
#   bash bench/gpu_run18.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs18; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_resid test_cuda_engine test_cuda_ops test_cuda_tp; do
  timeout 120 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -E "^FAIL" $L/*.txt | head
save
for b in 16 64 128; do
  for kv in dense 2048; do
    OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b \
      --ctx 28672 --kv-budget $kv --steps 10 --warmup 3 > $L/prof_trained_b${b}_$kv.txt 2>&1
    echo "== trained 28K batch $b $kv"; tail -16 $L/prof_trained_b${b}_$kv.txt
  done
  save
done
for kv in dense 2048; do
  OKV_CUDA_PROFILE=1 timeout 60 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 64 \
    --ctx 8192 --kv-budget $kv --steps 6 --warmup 2 > $L/prof_8b_b64_$kv.txt 2>&1
  echo "== 8B 8K batch 64 $kv"; tail -16 $L/prof_8b_b64_$kv.txt
done
save
