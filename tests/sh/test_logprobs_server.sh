#!/usr/bin/env bash
# label: server
# Log-probabilities through `oasiskv serve` with the project's trained target (in the
# repository): a completion's logprobs against its echo (prompt + completion resubmitted),
# and a sparse server's prompt entries against the dense server's
# (tests/py/check_logprobs_server.py; the GPU machine runs the same with --device cuda).
set -u
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
: "${OKV_CLI:?OKV_CLI not set}"
model="$src/train/checkpoints/run12/target"
if [ ! -f "$model/model.safetensors" ]; then
    echo "SKIP: no trained target at $model"
    exit 77
fi
exec timeout 300 python3 "$src/tests/py/check_logprobs_server.py" "$OKV_CLI" "$model" cpu 128
