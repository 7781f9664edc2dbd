#!/usr/bin/env bash
# label: server
# vLLM's launch options on `oasiskv serve` (a vLLM command line, the refusals, --max-logprobs, --response-role,
# CORS, HTTPS) with the SmolLM2-135M GGUF: see tests/py/check_server_launch.py.
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
: "${OKV_CLI:?OKV_CLI not set}"
py="$src/.venv/bin/python"
model="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
    echo "SKIP: no model at $model (scripts/fetch_model.sh fetches it)"
    exit 77
fi
if [ ! -x "$py" ] || ! "$py" -c "import openai, tokenizers" 2>/dev/null; then
    echo "SKIP: no Python venv with 'openai' and 'tokenizers' at $src/.venv (scripts/setup.sh creates it)"
    exit 77
fi
exec timeout 300 "$py" "$src/tests/py/check_server_launch.py" "$OKV_CLI" "$model" "$src"
