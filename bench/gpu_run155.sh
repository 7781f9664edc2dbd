#!/bin/bash
# Session 25 of 2026-12-02: the RMSNorm fused in front of the small-batch projections (the GEMV
# computes each row's scale as the rmsnorm kernel does and normalises on the fly; its first CTA
# writes the norm's output): every CUDA test, then the decode step with the fusion off
# (OKV_GEMV_NORM=0) and on, alternated twice. Written in session 25, not run (no device time left); the fusion is
# in commit 54be875, not in main's code: first `git checkout 54be875 -- src/backend/cuda tests/test_cuda_ops.c`, build, carry;
# test_cuda_ops turns the fusion on in its fused-ops test.
#   bash bench/gpu_run155.sh      (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
END=${END:-190}
echo "== tests"
for t in $B/tests/test_*; do
  s0=$SECONDS; timeout 100 $t > /tmp/t.txt 2>&1; rc=$?
  echo "$(basename $t) rc $rc ($((SECONDS - s0)) s): $(tail -n 1 /tmp/t.txt)"
  [ $rc -eq 0 ] || grep -E "FAIL" /tmp/t.txt | head -8
  [ $(basename $t) = test_cuda_ops ] && grep -E "fused ops, [0-9] rows, k [0-9 ]+ sequence [456]" /tmp/t.txt | head -15
done
S8="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
ST="-m train/checkpoints/run10/target --device cuda --steps 50 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25"
SS="--config bench/configs/smollm2-135m --device cuda --steps 50 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense --cache-factor 2 --sticky 0.25"
for round in 1 2; do
  for v in "OKV_GEMV_NORM=0" "OKV_GEMV_NORM=1"; do
    [ $SECONDS -lt $((END - 60)) ] || { echo "skipped step $v: no time"; continue; }
    echo "-- $v"
    env $v timeout 50 $B/bench/bench_step $S8 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/8b /'
    env $v timeout 30 $B/bench/bench_step $ST 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/trained /'
    env $v timeout 30 $B/bench/bench_step $SS 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | sed 's/^/smollm2 /'
  done
done
echo "done at $SECONDS s"
