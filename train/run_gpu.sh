#!/bin/sh
# Train the evaluation models on one GPU within a wall-clock budget (train/README.md).
#
#   OKV_BIN=build-gc/oasiskv train/run_gpu.sh OUT [SECONDS [SEED [RESUME_DIR]]]
#
# OUT gets target/ and draft/ (4 files each: config.json, model.safetensors (bf16),
# tokenizer.json, tokenizer_config.json); the haystack texts go to /tmp/okv_train_texts.
# SECONDS (default 510)
# bounds the whole run, report and saving included. RESUME_DIR: an earlier OUT to
# continue from (its weights; the optimizer restarts with a short warmup and the
# curriculum starts at its last phase). Extra train.py flags: OKV_TRAIN_ARGS.
set -eu
OKV_T0="$(date +%s)"
export OKV_T0
out="${1:?usage: run_gpu.sh OUT [SECONDS [SEED [RESUME_DIR]]]}"
secs="${2:-510}"
seed="${3:-0}"
resume="${4:-}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="${OKV_BIN:-build/oasiskv}"
py="${PYTHON:-python3}"
[ -x "$bin" ] || { echo "run_gpu.sh: $bin is not executable (set OKV_BIN)" >&2; exit 1; }
# the binary's shared libraries, when carried beside it (build-gc/lib) and missing here
bdir="$(cd "$(dirname "$bin")" && pwd)"
if ! "$bin" eval --list >/dev/null 2>&1 && [ -d "$bdir/lib" ]; then
    LD_LIBRARY_PATH="$bdir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
fi
mkdir -p "$out"
"$bin" eval --list >/dev/null || { echo "run_gpu.sh: $bin does not run" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null || true
set -- --out "$out" --bin "$bin" --budget "$secs" --seed "$seed"
if [ -n "$resume" ]; then
    set -- "$@" --resume "$resume" --phase-scale 0
fi
# shellcheck disable=SC2086
exec "$py" -u "$here/train.py" "$@" ${OKV_TRAIN_ARGS:-}
