#!/bin/bash
# GPU session of 2026-12-01 (17), one H200: kv_write 8 elements a thread (16-byte loads and
# stores; decode-shaped writes through to the host tier widen the summaries without atomics)
# against the one-element kernel (OKV_KVW_SCALAR=1). Section 23 put the dense phase's extra time
# in kv_write (0.160 -> 0.439 ms a step at 8B batch 1). First the CUDA tests (test_cuda_ops both
# ways), then bench_step: 8B batch 1 and 16 at 8K, trained target batch 1 and 16 at 9K, dense and
# a sparse engine's dense phase (--dense-while-room 1), overlapped; then the 8B batch-1 profiles.
#   bash bench/gpu_run110.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in cuda_ops cuda_engine dense_room cuda_graph; do
  timeout 150 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
OKV_KVW_SCALAR=1 timeout 150 build-gc2/tests/test_cuda_ops > $OUT/cuda_ops_scalar.txt 2>&1
echo "cuda_ops (OKV_KVW_SCALAR=1) exit $? $(tail -1 $OUT/cuda_ops_scalar.txt)"
grep -h "FAIL" $OUT/*.txt | head -8
echo "tests done at $SECONDS s"
E="--config bench/configs/llama3-8b --device cuda --batch 1,16 --ctx 8192 --kv-budget dense,2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 3 --overlap 1 --dense-while-room 1"
T="-m train/checkpoints/run3/target --device cuda --batch 1,16 --ctx 9216 --kv-budget dense,2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 50 --warmup 5 --overlap 1 --dense-while-room 1"
for rep in 1 2; do
  for s in 0 1; do
    echo "== rep $rep scalar $s" >> $OUT/kvw.md
    OKV_KVW_SCALAR=$s timeout 60 build-gc2/bench/bench_step $E 2>&1 | grep "^| [0-9]\|rror" >> $OUT/kvw.md
    OKV_KVW_SCALAR=$s timeout 40 build-gc2/bench/bench_step $T 2>&1 | grep "^| [0-9]\|rror" >> $OUT/kvw.md
  done
  echo "rep $rep done at $SECONDS s"
  [ $SECONDS -gt 300 ] && break
done
P="--config bench/configs/llama3-8b --device cuda --batch 1 --ctx 8192 --kv-host-dtype fp8 --steps 20 --warmup 3 --dense-while-room 1"
for s in 0 1; do
  for kv in dense 2048; do
    OKV_KVW_SCALAR=$s OKV_CUDA_PROFILE=1 timeout 60 build-gc2/bench/bench_step $P --kv-budget $kv 2>&1 | grep -E "kv_write|^\| [0-9]" | sed "s/^/scalar $s $kv: /" >> $OUT/prof.md
  done
done
cut -c1-70 $OUT/kvw.md; cat $OUT/prof.md | cut -c1-120
