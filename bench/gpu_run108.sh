#!/bin/bash
# GPU session of 2026-12-01 (17), one H200: the CUDA tests on f792f5c's tidy (slot ids at KV
# allocation, kv_move's ring upload: not run on a GPU before), then the 8B shape's 32K rows at
# concurrency 64, dense and budget 2048 (gpu_run107.sh part e), cut at END_S seconds.
#   bash bench/gpu_run108.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in dense_room prefix sched cuda_engine cuda_ops cuda_graph cuda_resid; do
  timeout 150 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
grep -h "FAIL" $OUT/*.txt | head -8
echo "tests done at $SECONDS s"
BUILD=build-gc2 PART=e END_S=$((560 - SECONDS)) bash bench/gpu_run107.sh
