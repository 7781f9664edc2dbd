#!/usr/bin/env bash
# label: unit
# Structured output under a JSON schema against the jsonschema package: random walks of the
# recognizer validate, instances drawn from each schema are accepted, broken ones refused,
# unsupported keywords refused by name (tests/py/check_json_schema_ref.py).
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
py="$src/.venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import jsonschema" 2>/dev/null; then
    echo "SKIP: no Python venv with the 'jsonschema' package at $src/.venv (scripts/setup.sh makes it)"
    exit 77
fi
exec "$py" "$src/tests/py/check_json_schema_ref.py" "${OKV_JSON_CHECK:?OKV_JSON_CHECK not set}" "$@"
