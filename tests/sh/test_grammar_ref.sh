#!/usr/bin/env bash
# label: unit
# The GBNF recognizer against Lark's Earley parser on random texts, walks through both grammars
# and their mutations, with every prefix's viability checked (tests/py/check_grammar_ref.py).
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
py="$src/.venv/bin/python"
[ -x "$py" ] || py=$(command -v python3) || { echo "no Python: skipped"; exit 77; }
"$py" -c "import lark" 2>/dev/null || { echo "Python package lark missing (scripts/setup.sh installs it): skipped"; exit 77; }
exec "$py" "$src/tests/py/check_grammar_ref.py" "${OKV_GRAMMAR_CHECK:?OKV_GRAMMAR_CHECK not set}" "$@"
