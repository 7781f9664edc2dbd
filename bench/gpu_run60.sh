#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: where the selection time goes (Nsight Compute on
# test_cuda_ops's select perf: 64 requests x 8 KV heads x 2000 candidates, bs 16 hd 128):
# the scoring kernels (Quest's bound, codes_mma_k, codes_k) and the top-k, and the exact-data
# selection test with 1-bit codes.
#   bash bench/gpu_run60.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
OKV_TEST_ONLY=select_batched timeout 100 build-gc/tests/test_cuda_ops > $OUT/batched.txt 2>&1
grep -E "select|score [0-9]|checks" $OUT/batched.txt | head -20
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
prof() {  # name regex skip
  OKV_TEST_ONLY=select_perf timeout 150 ncu $S --kernel-name regex:"$2" --launch-skip $3 --launch-count 1 \
    build-gc/tests/test_cuda_ops > $OUT/ncu_$1.txt 2>&1
  echo "== $1"; grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|Executed Ipc A" $OUT/ncu_$1.txt | head -14
}
prof mma codes_mma 3
prof codesk "codes_k" 3
prof quest quest_k 49
prof topk topk 49
