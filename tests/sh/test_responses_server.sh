#!/usr/bin/env bash
# label: server
# OpenAI's Responses API (POST /v1/responses) through `oasiskv serve` with the SmolLM2-135M GGUF, its own template and
# Qwen2.5's with tools, against the chat path's replies: see tests/py/check_responses_server.py.
set -u
. "$(dirname "$0")/server_env.sh"
exec timeout 300 "$py" "$src/tests/py/check_responses_server.py" "$OKV_CLI" "$model" "$src"
