#!/bin/bash
# GPU session of 2026-11-29 (6): serving A/B on a Llama-3-8B-shaped model (random
# weights), 8K-token prompts, dense vs --kv-budget 2048 behind the same 16 GiB pool.
#   bash bench/gpu_run6.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
CTX=10240 PROMPTS_PER_SLOT=1 timeout ${T:-320} bash bench/serve_ab.sh build-gc \
  "-m bench/configs/llama3-8b --load-format dummy --tokenizer tests/data/tok_llama3" 16 8192 128 "16 64" 2048 "--device cuda" \
  | tee $OUT/serve_8b.md
for f in $OUT/serve_*.log; do echo "== $f"; grep -E "error|holds|device KV" "$f" | head -3; done
