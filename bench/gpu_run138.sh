#!/bin/bash
# GPU session of 2026-12-02 (22), one H200: Nsight Compute on the prefill kernels, 8B shape,
# a 2048-row chunk at the end of a 32K prompt: the warp-specialised kernel (OKV_PREFILL_WS=1)
# against the two-warpgroup one (=0); stall reasons and the source view of the hot loop.
#   bash bench/gpu_run138.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
for w in 1 0; do
  OKV_PREFILL_WS=$w timeout 200 ncu $S --print-details all --kernel-name regex:"pf_w" --launch-skip 1 --launch-count 1 \
    $B/bench/cuda_attention --prefill 2048 --ctx 32768 > $OUT/ncu_ws$w.txt 2>&1
  echo "== WS=$w"; grep -E "Duration|SM Frequency|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Compute \(SM\) Throughput|Registers Per|Issued Ipc|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Stall|Shared|Tensor|pipe" $OUT/ncu_ws$w.txt | head -60
done
OKV_PREFILL_WS=1 timeout 200 ncu --section SourceCounters --print-details all --kernel-name regex:"pf_ws" --launch-skip 1 --launch-count 1 \
    $B/bench/cuda_attention --prefill 2048 --ctx 32768 > $OUT/ncu_ws1_src.txt 2>&1
grep -A40 "Warp Stall Sampling" $OUT/ncu_ws1_src.txt | head -60
OKV_PREFILL_WS=1 timeout 200 ncu --set full --import-source yes --kernel-name regex:"pf_ws" --launch-skip 1 --launch-count 1 -o $OUT/ws1 \
    $B/bench/cuda_attention --prefill 2048 --ctx 32768 > /dev/null 2>&1
ncu --import $OUT/ws1.ncu-rep --page source --print-source sass --csv > $OUT/ws1_sass.csv 2>&1; ls -la $OUT
echo "done at $SECONDS s"
