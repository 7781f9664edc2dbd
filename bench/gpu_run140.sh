#!/bin/bash
# GPU session of 2026-12-02 (22), one H200: the warp-specialised prefill kernel with its wgmma
# descriptors computed once a stage and O's rescale skipped where no row's maximum moved:
# test_cuda_ops, the kernel alone (8B shape, both turn modes and the two-warpgroup kernel),
# and Nsight Compute on it (issue slots, stall reasons).
#   bash bench/gpu_run140.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
mkdir -p $OUT/tests
timeout 150 $B/tests/test_cuda_ops > $OUT/tests/cuda_ops.txt 2>&1; echo "cuda_ops exit $? $(tail -1 $OUT/tests/cuda_ops.txt) at $SECONDS s"
grep -h "FAIL" $OUT/tests/*.txt | head -20
for shape in 32,8,128 4,2,64; do
  for rows in 512 2048; do
    for w in 1 2 0; do
      echo "== shape $shape rows $rows OKV_PREFILL_WS=$w"
      OKV_PREFILL_WS=$w timeout 60 $B/bench/cuda_attention --prefill $rows --ctx 8192,32768 --shape $shape 2>&1 | grep -E "prefill kernel  |rror"
    done
  done
done
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats"
OKV_PREFILL_WS=1 timeout 200 ncu $S --print-details all --kernel-name regex:"pf_ws" --launch-skip 1 --launch-count 1 \
    $B/bench/cuda_attention --prefill 2048 --ctx 32768 > $OUT/ncu_ws1.txt 2>&1
grep -E "Duration|SM Frequency|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Stall [A-Z]" $OUT/ncu_ws1.txt | head -24
echo "done at $SECONDS s"
