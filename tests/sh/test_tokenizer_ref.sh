#!/usr/bin/env bash
# label: unit
# Golden check of the C tokenizer against Hugging Face tokenizers (Python) over
# tests/data/tokenizer_corpus.json: SmolLM2 from the GGUF and from tokenizer.json,
# plus small Llama-3-style and Qwen2-style tokenizers. See tests/py/test_tokenizer_ref.py.
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
py="$src/.venv/bin/python"
if [ ! -x "$py" ]; then
    echo "SKIP: no Python venv at $src/.venv (create it and pip install tokenizers)"
    exit 77
fi
if ! "$py" -c "import tokenizers" 2>/dev/null; then
    echo "SKIP: the venv at $src/.venv has no 'tokenizers' package"
    exit 77
fi
exec "$py" "$src/tests/py/test_tokenizer_ref.py"
