#!/bin/bash
# Prepared in session 17 (2026-12-01), run in session 18 (found dense serving ignoring the pool: fixed,
# bench/RESULTS.md section 27; gpu_run113.sh checks the fix): serve --gpu-memory-utilization on the H200
# (written without a GPU: cudaMemGetInfo, the pool from an estimate of weights and activations, a
# smaller pool on out-of-memory). The 8B shape (random weights) and the trained target, dense and
# budget 2048, at 0.9 and 0.5: the startup line (pool size), nvidia-smi's memory while up, and a short
# bench serve (c16, 4K-word prompts) that must run with no failure.
#   bash bench/gpu_run111.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
port=21000
for M in "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json --ctx 8192" \
         "-m train/checkpoints/run3/target --ctx 32768"; do
  for kv in dense 2048; do
    for u in 0.9 0.5; do
      port=$((port + 1))
      log=$OUT/serve_${port}.log
      build-gc2/oasiskv serve $M --device cuda --port $port --kv-budget $kv --gpu-memory-utilization $u > $log 2>&1 &
      pid=$!
      for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
      echo "== $M kv $kv util $u: $(grep -h 'gpu-memory-utilization\|device KV tier\|error' $log | tr '\n' ' ' | cut -c1-400)"
      nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
      timeout 120 build-gc2/oasiskv bench serve --base-url http://127.0.0.1:$port --num-prompts 32 --max-concurrency 16 \
        --random-input-len 4000 --random-output-len 64 2>/dev/null | grep -E "Successful|Failed|Output token"
      kill $pid; wait $pid 2>/dev/null
    done
  done
done
