#!/usr/bin/env bash
# label: unit
# The structured-output JSON recognizer against Python's json module on random documents and
# their mutations (tests/py/check_json_ref.py).
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
py="$src/.venv/bin/python"
[ -x "$py" ] || py=python3
exec "$py" "$src/tests/py/check_json_ref.py" "${OKV_JSON_CHECK:?OKV_JSON_CHECK not set}" "$@"
