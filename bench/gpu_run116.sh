#!/bin/bash
# (The kernels it compares are in commit bc7f6ec only: not kept, bench/RESULTS.md section 28.)
# GPU session of 2026-12-01 (18), one H200: why Quest's scoring runs at ~1.3 TB/s of summaries.
# gpu_run115 found quest_stage_k (summaries staged in shared memory) slower than quest_lane_k.
# The selection call's timing for quest_stage_k, quest_lane_k and quest_lane_k with the next
# 16-byte piece prefetched (OKV_QUEST_PF=1); test_cuda_ops whole with the prefetching kernel as
# the default (its scores against the CPU backend's); Nsight Compute on the three kernels and the
# top-k (test_cuda_ops's select perf, 64 requests x 8 KV heads x 2000 candidates).
#   bash bench/gpu_run116.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
OKV_TEST_ONLY=select_perf timeout 100 build-gc2/tests/test_cuda_ops 2>&1 | grep -E "select perf: .*bs 16|quest" > $OUT/perf.txt
echo "== OKV_QUEST_PF=1" >> $OUT/perf.txt
OKV_QUEST_PF=1 OKV_TEST_ONLY=select_perf timeout 100 build-gc2/tests/test_cuda_ops 2>&1 | grep -E "select perf: .*bs 16|quest" >> $OUT/perf.txt
cat $OUT/perf.txt
OKV_QUEST_STAGE=0 OKV_QUEST_PF=1 timeout 200 build-gc2/tests/test_cuda_ops > $OUT/cuda_ops_pf.txt 2>&1
echo "cuda_ops (lane, prefetch) exit $? $(tail -1 $OUT/cuda_ops_pf.txt) at $SECONDS s"
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
prof() {  # name kernel-regex skip env...
  local n=$1 k=$2 sk=$3; shift 3
  env "$@" OKV_TEST_ONLY=select_perf timeout 120 ncu $S --kernel-name regex:"$k" --launch-skip $sk --launch-count 1 \
    build-gc2/tests/test_cuda_ops > $OUT/ncu_$n.txt 2>&1
  echo "== $n"; grep -E "Duration|DRAM Throughput|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|Dynamic Shared" $OUT/ncu_$n.txt | head -16
}
prof stage quest_stage 3 X=1
prof lane quest_lane 3 OKV_QUEST_STAGE=0
prof lane_pf quest_lane 3 OKV_QUEST_STAGE=0 OKV_QUEST_PF=1
prof topk topk 3 X=1
echo "done at $SECONDS s"
