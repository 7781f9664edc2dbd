#!/usr/bin/env bash
# label: server
# Malformed requests against `oasiskv serve` with the SmolLM2-135M GGUF (seeded JSON- and byte-level mutations of
# valid requests of every endpoint): no 5xx, every body parses, the server stays up and exits cleanly:
# see tests/py/check_server_fuzz.py.
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
: "${OKV_CLI:?OKV_CLI not set}"
model="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
    echo "SKIP: no model at $model (scripts/fetch_model.sh fetches it)"
    exit 77
fi
exec timeout 600 python3 "$src/tests/py/check_server_fuzz.py" "$OKV_CLI" "$model" 45 400
