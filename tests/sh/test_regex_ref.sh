#!/usr/bin/env bash
# label: unit
# The guided-regex DFA against Python's re on random texts, DFA walks and their mutations, with
# every prefix's viability checked (tests/py/check_regex_ref.py).
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
py="$src/.venv/bin/python"
[ -x "$py" ] || py=$(command -v python3) || { echo "no Python: skipped"; exit 77; }
exec "$py" "$src/tests/py/check_regex_ref.py" "${OKV_REGEX_CHECK:?OKV_REGEX_CHECK not set}" "$@"
