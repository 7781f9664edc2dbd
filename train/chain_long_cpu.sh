#!/bin/sh
# The reasoning-workload model (bench/ACCURACY.md, "chain_long: a model"): run 14's 0.9M draft
# (train/checkpoints/run14/draft: 2 layers, hidden 128, trained with the target on the seven families)
# resumed on chain and chain_long at 4K on the CPU, in two stages, with no GPU:
#   stage 1: 1,260 s, chain_long weighed 1.5, the rate 1e-3 (constant, then decaying over the last half);
#   stage 2: 3,300 s more, chain_long weighed 3, the rate 1e-3 decaying from the start (--decay-share 1).
# Session 33 ran stage 1 (one thread, beside another run: 7.1M tokens), session 34 stage 2 (two threads,
# ~11K tokens a second); the budgets are wall-clock seconds, so a faster machine trains on more tokens.
#   train/chain_long_cpu.sh OUT [SEED]     (OUT/stage1/target, OUT/target: config.json, safetensors, tokenizer)
# S1, S2: the stages' seconds (default 1260, 3300; a smoke run: S1=60 S2=60).
# PYTHON: a Python with torch, numpy, safetensors, tokenizers (CPU wheels are enough); OKV_BIN: the oasiskv
# binary (default build/oasiskv); the haystack texts are made by train/make_texts.py into OUT/texts.
set -eu
out="${1:?usage: chain_long_cpu.sh OUT [SEED]}"
seed="${2:-0}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
[ -d "$out/texts/train" ] || "${PYTHON:-python3}" "$here/make_texts.py" "$out/texts"
mkdir -p "$out/start"
cp -r "$here/checkpoints/run14/draft" "$out/start/target"   # resumed as a target with no draft of its own
common="--workers 1 --texts $out/texts --tasks chain,chain_long --no-draft --target-layers 2 --target-hidden 128
  --curriculum 0:4096 --max-ctx 4096 --tokens-per-step 8192 --lr 1e-3 --device cpu --report-ctx 4096 --report-samples 4"
OKV_TRAIN_ARGS="$common --task-weights chain=1,chain_long=1.5" \
  sh "$here/run_gpu.sh" "$out/stage1" "${S1:-1260}" "$seed" "$out/start"
OKV_TRAIN_ARGS="$common --task-weights chain=1,chain_long=3 --decay-share 1" \
  sh "$here/run_gpu.sh" "$out" "${S2:-3300}" "$seed" "$out/stage1"
