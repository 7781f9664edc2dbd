#!/usr/bin/env bash
# label: model
# SmolLM2-135M-Instruct (GGUF Q4_1) greedy continuations equal transformers' on the same file.
set -euo pipefail
model="$OKV_SOURCE_DIR/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
  echo "skipped: $model is missing (scripts/fetch_model.sh fetches it)"
  exit 77
fi
exec python3 "$OKV_SOURCE_DIR/tests/py/check_smollm2_ref.py" "$OKV_CLI" "$model"
