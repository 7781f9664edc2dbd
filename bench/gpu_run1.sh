#!/bin/bash
# One call on the GPU machine: CUDA tests, the decode-step benchmark (dense vs
# OasisKV on a Llama-3-8B-shaped dummy model), its PyTorch peer, and the fidelity
# benchmark on SmolLM2 -- logs under $OUT. Usage: bash bench/gpu_run1.sh [build dir]
set -u
. "$(dirname "$0")/gpu_env.sh" "${1:-build-gpu}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
free -g | tee -a "$OUT/gpu.txt"
(timeout 120 "$B/tests/test_cuda_ops" 2>&1 | tail -3; timeout 120 "$B/tests/test_cuda_engine" 2>&1 | tail -3) | tee "$OUT/cuda_tests.txt"
timeout ${STEP_T:-330} "$B/bench/bench_step" --config bench/configs/llama3-8b --device cuda ${STEP_ARGS:---batch 1,16,64 --ctx 8192,32768 --kv-budget dense,2048} \
  --steps 10 --warmup 3 --json "$OUT/step.json" 2>&1 | tee "$OUT/step.md"
timeout ${TORCH_T:-120} python3 bench/torch_step.py --config bench/configs/llama3-8b/config.json ${TORCH_ARGS:---batch 1,16,64 --ctx 8192,32768} \
  --steps 10 --json "$OUT/torch.json" 2>&1 | tee "$OUT/torch.md"
timeout ${SPARSE_T:-150} "$B/bench/bench_sparse" --device cuda --prompt-tokens 6000 --steps 500 --json "$OUT/sparse_gpu.json" 2>&1 | tee "$OUT/sparse_gpu.md"
