#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: the CUDA tests after the review tidy (one lane_block
# helper for quest_k and codes_mma_k; select_alt in test_cuda_ops).
#   bash bench/gpu_run67.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine resid graph; do
  timeout 150 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL" $OUT/ops.txt | head -5; grep -E "_k \(OKV" $OUT/ops.txt | head -4
