#!/bin/bash
# GPU session of 2026-12-01 (19), one H200: quest_coop_k with its request's queries staged in
# shared memory (the default) against the same reading them through L1 (OKV_QUEST_QSMEM=0) and
# against quest_lane_k (OKV_QUEST_COOP=0). test_cuda_ops (scores against the CPU backend's; the
# selection call's timing), Nsight Compute on the staged kernel, then the 8B shape's 32K batch-16
# sparse step (cache factor 16, 150 warm-up steps: selection without fetches) with the selection
# on its side stream (the default) and on the compute stream (OKV_SELECT_STREAM=0: the step then
# carries the selection's whole time), the variants alternated.
#   bash bench/gpu_run121.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
timeout 200 build-gc2/tests/test_cuda_ops > $OUT/cuda_ops.txt 2>&1; echo "cuda_ops exit $? $(tail -1 $OUT/cuda_ops.txt) at $SECONDS s"
grep -E "FAIL|quest" $OUT/cuda_ops.txt | head -12
for v in "X=1" "OKV_QUEST_QSMEM=0" "OKV_QUEST_COOP=0"; do
  echo "== $v" >> $OUT/perf.txt
  env $v OKV_TEST_ONLY=select_perf timeout 100 build-gc2/tests/test_cuda_ops 2>&1 | grep -E "select perf: .*bs 16" | head -2 >> $OUT/perf.txt
done
cat $OUT/perf.txt
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats"
OKV_TEST_ONLY=select_perf timeout 150 ncu $S --print-details all --kernel-name regex:quest_coop --launch-skip 3 --launch-count 1 \
    build-gc2/tests/test_cuda_ops > $OUT/ncu_coop_qsmem.txt 2>&1
grep -E "Duration|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy  |Executed Instructions  |Stall (Long|Short|Wait|Not Sel|MIO|Math)" $OUT/ncu_coop_qsmem.txt | head -16
A="--config bench/configs/llama3-8b --device cuda --kv-host-dtype fp8 --sticky 0.25 --kv-budget 2048 --batch 16 --ctx 32768 --cache-factor 16 --warmup 150 --steps 40"
for rep in 1; do
  for ss in 1 0; do
    for v in "X=1" "OKV_QUEST_QSMEM=0" "OKV_QUEST_COOP=0"; do
      echo "== rep $rep OKV_SELECT_STREAM=$ss $v" >> $OUT/step.md
      env $v OKV_SELECT_STREAM=$ss timeout 90 build-gc2/bench/bench_step $A 2>&1 | grep -E "^\| [0-9]|rror" >> $OUT/step.md
    done
  done
  echo "rep $rep done at $SECONDS s"
  [ $SECONDS -gt 330 ] && break
done
cut -c1-110 $OUT/step.md
