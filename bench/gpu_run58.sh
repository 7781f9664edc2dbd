#!/bin/bash
# GPU session of 2026-11-30 (12), one H200: the CUDA tests of commit bc712a8 (the request_of tidy,
# compiled but not run in session 11), then bench/gpu_run57.sh (serving with key codes).
#   bash bench/gpu_run58.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for t in ops engine resid graph; do
  timeout 150 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "select.*ms|codes.*ms" $OUT/ops.txt | tail -6
T_RUN=330 bash bench/gpu_run57.sh
