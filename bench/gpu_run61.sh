#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: codes_mma_k with the weights built by eight lanes a
# query (no idle lanes) and staged in shared memory. test_cuda_ops (and its exact-data batched
# selection with codes_k too), test_cuda_engine, selection times, then gpu_run57's serving row.
#   bash bench/gpu_run61.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL|score [0-9]" $OUT/ops.txt | head -8
OKV_CODES_MMA=0 OKV_TEST_ONLY=select_batched timeout 100 build-gc/tests/test_cuda_ops > $OUT/batched_codesk.txt 2>&1
echo "codes_k exact batched:"; grep -E "select|score [0-9]" $OUT/batched_codesk.txt | head -8
grep -E "select perf|codes_k, OKV" $OUT/ops.txt
T_RUN=330 bash bench/gpu_run57.sh
