#!/bin/bash
# Session 25 of 2026-12-02, after gpu_run153 (the split policy's item size is already the best at
# batch 1-4): the decode attention kernel's tuning variants at batch 1-8 (cuda_attention
# --variants: 0 default <4 warps, 32-key chunks, 3 stages>, 1 <4, 16, 3>, 2 <4, 16, 4>,
# 4 <4, 16, 2>, 5 <8 warps, 16, 3>, 6 <2 warps, 16, 4>), each with the policy's split and 256 keys a item.
#   bash bench/gpu_run154.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
timeout 200 $B/bench/cuda_attention --ctx 8192,32768 --max-batch 8 --variants 0,1,2,4,5,6 --kpi 0,256 > $OUT/attn_var.txt 2>&1
cat $OUT/attn_var.txt
echo "done at $SECONDS s"
