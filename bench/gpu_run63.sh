#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: Nsight Compute on codes_mma_k (test_cuda_ops's select
# perf, 64 requests x 8 KV heads x 2000 candidates, bs 16 hd 128, 2-bit codes), then the reasoning
# shape with key codes at c128 x 16384 (session 10's row: Quest 33176 output tok/s, dense 25085).
#   bash bench/gpu_run63.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
OKV_TEST_ONLY=select_perf timeout 150 ncu $S --kernel-name regex:codes_mma --launch-skip 3 --launch-count 1 \
  build-gc/tests/test_cuda_ops > $OUT/ncu_codes_mma.txt 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued" $OUT/ncu_codes_mma.txt | head -8
L=/tmp/okv_logs63; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
TAG=reason_codes2_o16384 KVS=2048 PORT0=27200 DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
  PROMPTS_PER_SLOT=1 timeout 300 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 128 \
  2048 "--device cuda --kv-key-codes 2" >> $L/serve.md 2>&1
tail -1 $L/serve.md
tar cf $OUT/logs.tar -C $L .
