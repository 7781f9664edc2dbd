#!/usr/bin/env bash
# label: server
# vLLM's launch options on `oasiskv serve` (a vLLM command line, the refusals, --max-logprobs, --response-role,
# CORS, HTTPS) with the SmolLM2-135M GGUF: see tests/py/check_server_launch.py.
set -u
. "$(dirname "$0")/server_env.sh"
exec timeout 300 "$py" "$src/tests/py/check_server_launch.py" "$OKV_CLI" "$model" "$src"
