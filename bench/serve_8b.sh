#!/bin/bash
# Serving A/B (dense vs --kv-budget 2048, same device pool) on a Llama-3-8B-shaped model
# with random weights, with a tokenizer padded to the model's whole vocabulary (so every
# sampled id decodes to text; bench/pad_tokenizer.py).
#   bench/serve_8b.sh BUILD POOL_GB INPUT_LEN "CONCURRENCIES" [extra serve args]
# e.g. bench/serve_8b.sh build-gc 16 8192 "16 64 256" "--device cuda"
set -eu
B=$1; POOL=$2; IN=$3; CONCS=$4; EXTRA=${5:---device cuda}
python3 "$(dirname "$0")/pad_tokenizer.py" tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b
# random prompts re-tokenize ~15% longer than the words asked for: room in the context
CTX=$((IN * 5 / 4 + 256)) PROMPTS_PER_SLOT=${PROMPTS_PER_SLOT:-1} bash "$(dirname "$0")/serve_ab.sh" "$B" \
  "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" "$POOL" "$IN" 128 "$CONCS" 2048 "$EXTRA"
