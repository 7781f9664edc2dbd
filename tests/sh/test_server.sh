#!/usr/bin/env bash
# label: server
# Black-box test of `oasiskv serve` against real servers on 127.0.0.1 with the
# SmolLM2-135M GGUF: see tests/py/test_server.py. Servers still alive when this
# script ends (whatever the reason) are killed by the trap below.
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
: "${OKV_CLI:?OKV_CLI not set}"
py="$src/.venv/bin/python"
model="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
    echo "SKIP: no model at $model (scripts/fetch_model.sh fetches it)"
    exit 77
fi
if [ ! -x "$py" ]; then
    echo "SKIP: no Python venv at $src/.venv (scripts/setup.sh creates it)"
    exit 77
fi
if ! "$py" -c "import openai, tokenizers" 2>/dev/null; then
    echo "SKIP: the venv at $src/.venv lacks the 'openai' or 'tokenizers' package (scripts/setup.sh installs them)"
    exit 77
fi
pids="$(mktemp)"
cleanup() {
    while read -r pid; do
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    done < "$pids"
    rm -f "$pids"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
OKV_SERVER_PIDS="$pids" "$py" "$src/tests/py/test_server.py"
