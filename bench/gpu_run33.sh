#!/bin/bash
# GPU session of 2026-11-30 (8), one H200, first call: the code of session 7 not yet run on a
# GPU (grow_device helper, the restructured graph flush, test_cuda_tp under the compute-only
# sync) through test_cuda_graph, test_cuda_engine, test_cuda_tp, test_cuda_ops, test_cuda_resid;
# then gpu_run32 (gather contention; fetch-CTA sweep at batch 128).
#   bash bench/gpu_run33.sh      (carry build-gc; results under $OUT: logs.tar, logs32.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs33; mkdir -p $L
for t in test_cuda_graph test_cuda_engine test_cuda_tp test_cuda_ops test_cuda_resid; do
  timeout 120 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -hE "^FAIL" $L/*.txt | head
tar cf $OUT/logs.tar -C $L .
OUTSAVE=$OUT; OUT=$OUT/r32; mkdir -p $OUT; bash bench/gpu_run32.sh; OUT=$OUTSAVE
