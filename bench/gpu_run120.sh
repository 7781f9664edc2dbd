#!/bin/bash
# GPU session of 2026-12-01 (19), one H200: Nsight Compute on quest_coop_k against quest_lane_k
# (test_cuda_ops's select perf call, 64 requests x 8 KV heads x 2000 candidates, 16-token blocks),
# with the warp stall reasons, and the kernels' SASS where cuobjdump is on the machine.
#   bash bench/gpu_run120.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats"
prof() {  # name kernel-regex skip env...
  local n=$1 k=$2 sk=$3; shift 3
  env "$@" OKV_TEST_ONLY=select_perf timeout 150 ncu $S --print-details all --kernel-name regex:"$k" --launch-skip $sk --launch-count 1 \
    build-gc2/tests/test_cuda_ops > $OUT/ncu_$n.txt 2>&1
  echo "== $n"; grep -E "Duration|DRAM Throughput|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issued Ipc|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Stall" $OUT/ncu_$n.txt | head -40
}
prof coop quest_coop 3 X=1
prof lane quest_lane 3 OKV_QUEST_COOP=0
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass -fun '_Z12quest_coop_kILi4EEvPKfPK13__nv_bfloat16PKiiS6_S6_iiiiPf' build-gc2/tests/test_cuda_ops > $OUT/coop4.sass 2>&1
  echo "sass lines: $(wc -l < $OUT/coop4.sass)"
else echo "no cuobjdump"; fi
echo "done at $SECONDS s"
