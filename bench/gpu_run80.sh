#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: log-probabilities (logprobs, echo) through
# `oasiskv serve --device cuda` with the trained target, dense and sparse
# (tests/py/check_logprobs_server.py; the CPU side is in CI's test_server.py and test_sched).
#   bash bench/gpu_run80.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
timeout 200 python3 tests/py/check_logprobs_server.py build-gc/oasiskv train/checkpoints/run3/target cuda 128 2>&1 | tee $OUT/logprobs_cuda.txt
