#!/usr/bin/env bash
# label: unit
# Every GGUF block format the loader reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K,
# IQ1_S .. IQ4_XS), converted by the C loader, against the `gguf` package's dequantization
# on fresh random blocks (see tests/py/check_gguf_quants.py); first, the IQ formats' grid
# and sign tables (src/model/iq_grids.c) against the package's, entry for entry.
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
py="$src/.venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import gguf, numpy" 2>/dev/null; then
    echo "SKIP: no Python venv with the 'gguf' package at $src/.venv (scripts/setup.sh makes it)"
    exit 77
fi
"$py" "$src/scripts/gen_iq_grids.py" --check || exit 1
exec "$py" "$src/tests/py/check_gguf_quants.py" "${OKV_TENSOR_DUMP:?OKV_TENSOR_DUMP not set}" "$@"
