#!/usr/bin/env bash
# label: server
# Tools (function calling) through `oasiskv serve` with the SmolLM2-135M GGUF, with its own template and with
# Qwen2.5's template with tools: see tests/py/check_tools_server.py.
set -u
. "$(dirname "$0")/server_env.sh"
exec timeout 300 "$py" "$src/tests/py/check_tools_server.py" "$OKV_CLI" "$model" "$src"
