# Sourced by the black-box server tests (test_*_server.sh, test_server_launch.sh): $src, $py (the venv's Python) and
# $model (the SmolLM2-135M GGUF), or a skip (exit 77) naming what is missing.
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
: "${OKV_CLI:?OKV_CLI not set}"
py="$src/.venv/bin/python"
model="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
    echo "SKIP: no model at $model (scripts/fetch_model.sh fetches it)"
    exit 77
fi
if [ ! -x "$py" ] || ! "$py" -c "import openai, tokenizers" 2>/dev/null; then
    echo "SKIP: no Python venv with 'openai' and 'tokenizers' at $src/.venv (scripts/setup.sh creates it)"
    exit 77
fi
