#!/bin/bash
# (OKV_GEMV_PIPE, measured here, was removed later in session 25: it never won.)
# Session 25 of 2026-12-02: the small-batch projection (GEMV) against the HBM ceiling, and
# programmatic dependent launch (PDL) between the decode step's kernels.
#  1. the CUDA tests with the new switches on (OKV_PDL=1 OKV_GEMV_PIPE=1): PDL changes when a
#     projection may start, so the graph and engine tests must still give the same values;
#  2. cuda_gemv (bench/cuda_gemv.c): each projection shape alone, GB/s of weights, for the
#     kernel's variants (OKV_GEMV_UNROLL 4/8, OKV_GEMV_PIPE, OKV_PDL);
#  3. bench_step on the Llama-3-8B shape (batch 1 and 4, 8K, dense and 2048) and the trained
#     target for the variants that matter, alternated twice;
#  4. if time is left: gpu_run149's serving pair (n-gram drafts, off / deferred).
#   bash bench/gpu_run150.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
END=${END:-570}
echo "== tests (OKV_PDL=1 OKV_GEMV_PIPE=1)"
for t in test_cuda_ops test_cuda_graph test_cuda_engine; do
  s0=$SECONDS; OKV_PDL=1 OKV_GEMV_PIPE=1 timeout 120 $B/tests/$t > $OUT/$t.txt 2>&1; rc=$?
  echo "$t rc $rc ($((SECONDS - s0)) s): $(tail -1 $OUT/$t.txt)"
done
echo "== cuda_gemv"
for v in "OKV_GEMV_UNROLL=4" "OKV_GEMV_PIPE=1" "OKV_GEMV_UNROLL=8" "OKV_GEMV_UNROLL=8 OKV_GEMV_PIPE=1" "OKV_PDL=1" "OKV_PDL=1 OKV_GEMV_PIPE=1" "OKV_PDL=1 OKV_GEMV_UNROLL=8"; do
  [ $SECONDS -lt $((END - 330)) ] || { echo "skipped gemv $v: no time"; continue; }
  s0=$SECONDS; env $v timeout 60 $B/bench/cuda_gemv --shapes 8b,trained 2>&1 | grep -E "^GEMV|^\| [a-z0-9]|rror"; echo "($((SECONDS - s0)) s)"
done
echo "== bench_step"
S8="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
ST="-m train/checkpoints/run10/target --device cuda --steps 50 --warmup 5 --batch 1,16 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25"
for round in 1 2; do
  for v in "OKV_PDL=0" "OKV_PDL=1" "OKV_PDL=1 OKV_GEMV_PIPE=1"; do
    [ $SECONDS -lt $((END - 120)) ] || { echo "skipped step $v: no time"; continue; }
    echo "-- 8b $v"; env $v timeout 80 $B/bench/bench_step $S8 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8
    echo "-- trained $v"; env $v timeout 40 $B/bench/bench_step $ST 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8
  done
done
echo "done at $SECONDS s"
