#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: key codes scored with tensor cores (codes_mma_k).
# test_cuda_ops (GPU against CPU; tensor cores against codes_k; selection times of both kernels),
# test_cuda_engine, then gpu_run57's serving row again (reasoning shape, c64, --kv-key-codes 2).
#   bash bench/gpu_run59.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL" $OUT/ops.txt | head -5
grep -E "select perf|codes_k, OKV" $OUT/ops.txt
T_RUN=330 bash bench/gpu_run57.sh
