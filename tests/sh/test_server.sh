#!/usr/bin/env bash
# label: server
# Black-box test of `oasiskv serve` against real servers on 127.0.0.1 with the
# SmolLM2-135M GGUF: see tests/py/test_server.py. Servers still alive when this
# script ends (whatever the reason) are killed by the trap below.
set -u
. "$(dirname "$0")/server_env.sh"
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
