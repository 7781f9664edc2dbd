#!/usr/bin/env bash
# label: server
# OpenAI's Responses API (POST /v1/responses) through `oasiskv serve` with the SmolLM2-135M GGUF, its own template and
# Qwen2.5's with tools, against the chat path's replies: see tests/py/check_responses_server.py.
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
exec timeout 300 "$py" "$src/tests/py/check_responses_server.py" "$OKV_CLI" "$model" "$src"
