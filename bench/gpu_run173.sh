#!/bin/bash
# Session 37 of 2026-12-05: the first GPU call since session 34. The CUDA tests (sessions 35 and 36 added the
# layer-ahead-attn variant, the rank merge in the residency's install kernel and the drafted-row variants of
# test_cuda_engine, none run on a GPU yet) run in the background, one binary after another, while
# bench/gpu_run172.sh trains run 15 on chain/chain_long and evaluates chain_long at 8K.
#   bash bench/park_checkpoints.sh keep run15; bash bench/gpu_run173.sh
#   (carry build-gc and build-texts; $OUT/tests.tgz besides gpu_run172.sh's files)
set -u
. bench/gpu_env.sh build-gc
T=/tmp/okv_tests; mkdir -p $T
(
  for t in $B/tests/test_cuda_resid $B/tests/test_cuda_ops $B/tests/test_cuda_engine $B/tests/test_cuda_graph \
           $B/tests/test_prefix $B/tests/test_sched $B/tests/test_dense_room $B/tests/test_cuda_tp; do
    n=$(basename $t); s=$(date +%s)
    timeout 240 $t > $T/$n.log 2>&1; rc=$?
    echo "$n: exit $rc ($(( $(date +%s) - s )) s) $(grep -E "checks" $T/$n.log | tail -1)" >> $T/summary.txt
    tar -C /tmp -czf $OUT/tests.tgz okv_tests
  done
  nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv >> $T/summary.txt 2>&1
  tar -C /tmp -czf $OUT/tests.tgz okv_tests
) &
tests=$!
BUDGET=${BUDGET:-300} END=${END:-570} bash bench/gpu_run172.sh
wait $tests
cat $T/summary.txt
grep -h "FAIL" $T/*.log | head -30
