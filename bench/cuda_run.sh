#!/bin/bash
# The CUDA tests and kernel benchmarks on the GPU machine, from a build made elsewhere
# and carried in build-cuda (libraries the machine lacks in build-cuda/lib).
#   bash bench/cuda_run.sh [build dir]      logs under $OUT (default /tmp/okv_cuda_out)
set -u
. "$(dirname "$0")/gpu_env.sh" "${1:-build-cuda}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
for t in test_cuda_ops test_cuda_engine; do
  start=$(date +%s)
  timeout 300 "$B/tests/$t" > "$OUT/$t.log" 2>&1
  rc=$?
  echo "$t: exit $rc ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
  grep -E "FAIL|checks" "$OUT/$t.log" | head -20
done
echo "repository at $PWD"
if [ "$PWD" = /work/main ] && command -v ctest > /dev/null; then
  (cd "$B" && timeout 300 ctest -L cuda --output-on-failure) > "$OUT/ctest.txt" 2>&1
  echo "ctest -L cuda: exit $?" | tee -a "$OUT/summary.txt"
  tail -6 "$OUT/ctest.txt"
fi
timeout 240 "$B/bench/cuda_gather" > "$OUT/gather.txt" 2>&1; echo "cuda_gather: exit $?" | tee -a "$OUT/summary.txt"
timeout 240 "$B/bench/cuda_attention" > "$OUT/attention.txt" 2>&1; echo "cuda_attention: exit $?" | tee -a "$OUT/summary.txt"
if [ "${OKV_SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
  OKV_TEST_SEED=12345 timeout 240 compute-sanitizer --tool memcheck --leak-check no "$B/tests/test_cuda_ops" > "$OUT/sanitizer.log" 2>&1
  echo "compute-sanitizer memcheck test_cuda_ops: exit $?" | tee -a "$OUT/summary.txt"
  grep -E "ERROR SUMMARY|Invalid|checks" "$OUT/sanitizer.log" | head -10
fi
cat "$OUT/gather.txt" "$OUT/attention.txt"
cat "$OUT/summary.txt"
