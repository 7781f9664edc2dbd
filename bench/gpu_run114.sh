#!/bin/bash
# GPU session of 2026-12-01 (18), one H200: where the 32K batch-16 sparse step's time goes
# (section 27: 11.35 ms at cache factor 16, nearly nothing fetched, against a roofline of 4.0 ms;
# dense 23.8 ms at 73% of its own). OKV_CUDA_PROFILE=1 tables for the sparse step (cache factor
# 16, 150 warm-up steps) and the dense one, then the same step unprofiled with the selection on
# the compute stream (OKV_SELECT_STREAM=0) to see what the side stream buys.
#   bash bench/gpu_run114.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
S="--config bench/configs/llama3-8b --device cuda --batch 16 --ctx 32768 --kv-host-dtype fp8 --sticky 0.25 --cache-factor 16"
OKV_CUDA_PROFILE=1 OKV_CUDA_PROFILE_SKIP=150 timeout 120 build-gc2/bench/bench_step $S --kv-budget 2048 --warmup 150 --steps 20 > $OUT/prof_sparse.txt 2>&1
OKV_CUDA_PROFILE=1 timeout 120 build-gc2/bench/bench_step $S --kv-budget dense --warmup 5 --steps 10 > $OUT/prof_dense.txt 2>&1
OKV_SELECT_STREAM=0 timeout 120 build-gc2/bench/bench_step $S --kv-budget 2048 --warmup 150 --steps 40 > $OUT/selstream0.txt 2>&1
for f in $OUT/*.txt; do echo "== $f"; grep -E "^\| [0-9]|OKV_CUDA_PROFILE|^  |rror" $f; done
