#!/bin/sh
# label: unit
# The training data of train/ (train/README.md): samples dumped by `oasiskv eval
# --dump-samples --text-dir` are valid (answers where the needle spans say, reference
# continuations scored correct, prompts within the context, token ids equal to the
# `tokenizers` package's), deterministic for a seed, never drawn from the held-out
# evaluation texts; and the C tokenizer equals `tokenizers` on the committed
# train/tokenizer for a few hundred strings. See tests/py/check_train_data.py.
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
py="$src/.venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import tokenizers, numpy" 2>/dev/null; then
    echo "SKIP: no Python venv with tokenizers and numpy at $src/.venv"
    exit 77
fi
exec "$py" "$src/tests/py/check_train_data.py" "${OKV_CLI:?OKV_CLI not set}" "${OKV_TOK_DUMP:?OKV_TOK_DUMP not set}"
