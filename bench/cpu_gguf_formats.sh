#!/usr/bin/env bash
# CPU decode speed of SmolLM2-135M-Instruct in the GGUF formats llama.cpp's presets write
# (Q4_K_M, Q5_K_M, Q6_K) against the shipped Q4_1, with the stored-format projections
# (cpu_qgemv.c) and without them (OKV_CPU_QGEMV=0: the fp32 copy); and, when a Python with
# transformers is given (REF_PY=/path/to/python), whether transformers' greedy tokens on each
# file equal the engine's (6 prompts x 32 steps, tests/data/smollm2_greedy.json's prompts).
#
#   bash bench/cpu_gguf_formats.sh            # RUNS=3 N=128 THREADS=2
#
# The K-format files are made from the Q4_1 file by llama.cpp's llama-quantize
# (--allow-requantize), which the script builds once into build-llamacpp/ from the llama.cpp
# inside the llama-cpp-python sdist on PyPI (LLAMA_QUANTIZE=/path skips that). Requantized
# weights are not the model's best K-format weights (they went through Q4_1 first); the point
# here is the formats' decode cost and the engine's reading of them.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
N=${N:-128}
THREADS=${THREADS:-2}
SRC=models/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=${OUT:-build-llamacpp/models}
[ -f "$SRC" ] || scripts/fetch_model.sh
if [ -z "${LLAMA_QUANTIZE:-}" ]; then
  LLAMA_QUANTIZE=build-llamacpp/b/bin/llama-quantize
  if [ ! -x "$LLAMA_QUANTIZE" ]; then
    mkdir -p build-llamacpp
    (cd build-llamacpp && python3 -m pip download --quiet --no-deps --no-binary :all: llama-cpp-python==0.3.36 &&
       tar xzf llama_cpp_python-0.3.36.tar.gz)
    L=build-llamacpp/llama_cpp_python-0.3.36/vendor/llama.cpp
    cmake -S "$L" -B build-llamacpp/b -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
    cmake --build build-llamacpp/b -j"$(nproc)" --target llama-quantize >/dev/null
  fi
fi
mkdir -p "$OUT"
files=("$SRC")
for p in Q4_K_M Q5_K_M Q6_K; do
  f="$OUT/SmolLM2-135M-Instruct.$p.gguf"
  [ -f "$f" ] || "$LLAMA_QUANTIZE" --allow-requantize "$SRC" "$f" "$p" 2 >/dev/null 2>&1
  files+=("$f")
done
[ -x build/oasiskv ] || { echo "build/oasiskv missing: bash scripts/setup.sh --no-run" >&2; exit 1; }
printf "%-36s %7s %14s %14s\n" file MiB "stored tok/s" "fp32 tok/s"
for f in "${files[@]}"; do
  row=()
  for q in 1 0; do
    v=()
    for r in $(seq "$RUNS"); do
      v+=("$(OKV_CPU_QGEMV=$q build/oasiskv generate -m "$f" -p "The history of the printing press begins in" -n "$N" \
        --temp 0 --ignore-eos --json --threads "$THREADS" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["stats"]["decode_tokens_per_s"])')")
    done
    row+=("$(printf "%s\n" "${v[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')")   # median
  done
  printf "%-36s %7.1f %14s %14s\n" "$(basename "$f")" "$(awk -v b="$(stat -c %s "$f")" 'BEGIN { print b / 1048576 }')" "${row[0]}" "${row[1]}"
done
if [ -n "${REF_PY:-}" ]; then
  "$REF_PY" - "${files[@]}" <<'PY'
import json, os, subprocess, sys
import numpy as np, torch
os.environ["HF_HUB_OFFLINE"] = "1"
from transformers import AutoModelForCausalLM
torch.set_num_threads(2)
ref = json.load(open("tests/data/smollm2_greedy.json"))
for f in sys.argv[1:]:
    d, name = os.path.split(f)
    m = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32, attn_implementation="eager").eval()
    equal = []
    for case in ref["prompts"]:
        ids, toks = list(case["prompt_tokens"]), []
        with torch.no_grad():
            out = m(torch.tensor([ids]), use_cache=True)
            for _ in range(32):
                t = int(out.logits[0, -1].argmax()); toks.append(t)
                out = m(torch.tensor([[t]]), past_key_values=out.past_key_values, use_cache=True)
        r = subprocess.run(["build/oasiskv", "generate", "-m", f, "--prompt-tokens", ",".join(map(str, ids)), "-n", "32",
                            "--temp", "0", "--ignore-eos", "--json", "--threads", "2"], capture_output=True, text=True)
        got = json.loads(r.stdout)["tokens"]
        equal.append(next((i for i in range(32) if got[i] != toks[i]), 32))
    print(f"{name}: greedy steps equal to transformers per prompt {equal} ({sum(e == 32 for e in equal)}/6 all 32)")
PY
fi
