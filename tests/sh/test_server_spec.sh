#!/usr/bin/env bash
# label: server
# `oasiskv serve --draft ngram` returns the same greedy text as without drafts.
set -euo pipefail
model="$OKV_SOURCE_DIR/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
  echo "skipped: $model is missing"
  exit 77
fi
exec timeout 600 python3 "$OKV_SOURCE_DIR/tests/py/check_server_spec.py" "$OKV_CLI" "$model"
