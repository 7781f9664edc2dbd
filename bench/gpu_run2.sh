#!/bin/bash
# The second GPU call: CUDA tests, kernel benchmarks, the decode step (Llama-3-8B
# shape, dense vs OasisKV) and its PyTorch peer, and dense vs OasisKV serving of a
# SmolLM2-shaped model behind the HTTP server. Logs under $OUT.
#   bash bench/gpu_run2.sh BUILD_DIR
set -u
. "$(dirname "$0")/gpu_env.sh" "${1:-build-gc}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
(timeout 150 "$B/tests/test_cuda_ops" 2>&1 | tail -2; timeout 120 "$B/tests/test_cuda_engine" 2>&1 | tail -2) | tee "$OUT/cuda_tests.txt"
timeout 60 "$B/bench/cuda_gather" > "$OUT/gather.txt" 2>&1
timeout 60 "$B/bench/cuda_attention" > "$OUT/attention.txt" 2>&1
echo "tests+kernels: $(( $(date +%s) - t0 )) s"
timeout ${STEP_T:-200} "$B/bench/bench_step" --config bench/configs/llama3-8b --device cuda \
  --batch ${STEP_BATCH:-1,16,64} --ctx ${STEP_CTX:-8192,32768} --kv-budget dense,2048 \
  --steps 10 --warmup 3 --json "$OUT/step.json" 2>&1 | tee "$OUT/step.md"
echo "step: $(( $(date +%s) - t0 )) s"
timeout ${TORCH_T:-70} python3 bench/torch_step.py --config bench/configs/llama3-8b/config.json \
  --batch ${STEP_BATCH:-1,16,64} --ctx ${STEP_CTX:-8192,32768} --steps 10 --json "$OUT/torch.json" 2>&1 | tee "$OUT/torch.md"
echo "torch: $(( $(date +%s) - t0 )) s"
timeout ${SERVE_T:-200} bash bench/serve_ab.sh "$B" "-m bench/configs/smollm2-135m --load-format dummy --tokenizer tests/data/smollm2" \
  ${POOL:-1} ${IN:-4096} ${OUTL:-128} "${CONCS:-1 16 64 256}" 2048 "--device cuda" 2>&1 | tee "$OUT/serve_ab.md"
echo "serve: $(( $(date +%s) - t0 )) s"
