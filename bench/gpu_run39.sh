#!/bin/bash
# GPU session of 2026-11-30 (8): is the sparse step's compute slowdown (gpu_run37: norms, adds
# and projections 3-7x slower than in the dense step) caused by the gathers' CTAs? The
# trained target at 28K, batch 128, budget 2048, profiled (OKV_CUDA_PROFILE=1, graphs off) with
# the gather kernel forced to 1, 4 and 32 CTAs, and once with the both-streams step sync.
#   bash bench/gpu_run39.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs39; mkdir -p $L
S="-m train/checkpoints/run3/target --device cuda --batch 128 --ctx 28672 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --steps 12 --warmup 3"
for fc in 1 4 32; do
  OKV_FETCH_CTAS=$fc OKV_CUDA_PROFILE=1 timeout 90 build-gc/bench/bench_step $S > $L/prof_ctas$fc.txt 2>&1
  echo "== fetch CTAs $fc"; grep -A12 OKV_CUDA_PROFILE $L/prof_ctas$fc.txt | grep -E "PROFILE|matmul|rmsnorm|swiglu|attention|select"; grep '^| [0-9]' $L/prof_ctas$fc.txt
done
OKV_STEP_SYNC=both OKV_CUDA_PROFILE=1 timeout 90 build-gc/bench/bench_step $S > $L/prof_syncboth.txt 2>&1
echo "== sync both"; grep -A12 OKV_CUDA_PROFILE $L/prof_syncboth.txt | grep -E "PROFILE|matmul|rmsnorm|swiglu|attention|select"
tar cf $OUT/logs.tar -C $L .
