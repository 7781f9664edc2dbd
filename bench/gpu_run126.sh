#!/bin/bash
# GPU session of 2026-12-01 (20), one H200: the CUDA tests on the tree with session 19's
# unverified fixes (RoPE head check, SwiGLU padding, coop-vs-lane Quest test, the
# large-run flag moved to okv_cuda_graph_push), then training run 8, part 1: from scratch
# with the restated multi-query / multi-key references, for what is left of 565 s.
# The target and the draft come back under $OUT (target/ 4 files, draft.tar, logs).
#   bash bench/gpu_run126.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
export PYTHONUNBUFFERED=1
mkdir -p $OUT/tests
for t in cuda_ops cuda_graph cuda_engine sched dense_room cuda_resid prefix; do
  timeout 120 build-gc2/tests/test_$t > $OUT/tests/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/tests/$t.txt) at $SECONDS s"
done
grep -h "FAIL" $OUT/tests/*.txt | head
tar -C $OUT -cf $OUT/tests.tar tests && rm -rf $OUT/tests
T=$((565 - SECONDS))
echo "training for $T s"
OKV_BIN=build-gc2/oasiskv OKV_TRAIN_ARGS="--workers 14" bash train/run_gpu.sh /tmp/tr $T 0 2>&1 | tee $OUT/train.log | grep -v "^\[.*\] step "
mkdir -p $OUT/target && cp /tmp/tr/target/* $OUT/target/ && tar -C /tmp/tr -cf $OUT/draft.tar draft && ls -la $OUT/target $OUT/draft.tar
