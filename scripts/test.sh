#!/usr/bin/env bash
# Build (if needed) and run the whole test suite with ctest. Extra arguments go to
# ctest (e.g. -L unit, -R tokenizer). GPU tests (label cuda) skip without a GPU.
# Then the tests that run threads (background prefetch, thread pool, scheduler) run
# again under ThreadSanitizer (skip with OKV_NO_TSAN=1), optimised (-O2 -g): at -O0 the TP
# test alone took 6.5 min under it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(scripts/cuda_flag.sh) >/dev/null
cmake --build build -j"$(nproc)"
(cd build && ctest --output-on-failure --timeout 900 "$@")
if [ -z "${OKV_NO_TSAN:-}" ] && [ $# -eq 0 ]; then
  echo "--- ThreadSanitizer: threaded tests ---"
  tsan_tests="^(test_engine_batch|test_sparse|test_spec|test_sched|test_tp|test_cpu_attention|test_cpu_qgemv)$"
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOKV_SANITIZE=thread -DOKV_CUDA=OFF >/dev/null
  cmake --build build-tsan -j"$(nproc)" --target test_engine_batch test_sparse test_spec test_sched test_tp test_cpu_attention test_cpu_qgemv
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest -j"$(nproc)" --output-on-failure --timeout 900 -R "$tsan_tests")
fi
