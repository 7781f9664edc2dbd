#!/usr/bin/env bash
# One command for a fresh machine: install the Debian packages OasisKV builds on,
# a Python venv for the test references, build, fetch the default model and run
# a generation on it.
#   scripts/setup.sh            everything, ending with a generation
#   scripts/setup.sh --no-run   everything but the generation (CI)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
run_demo=1
[ "${1:-}" = "--no-run" ] && run_demo=0

pkgs=(build-essential cmake pkg-config libopenblas-dev libpcre2-dev libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev python3-venv python3-pip openssl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing Debian packages: ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Held-out English prose for the accuracy evaluation's essay haystacks (oasiskv eval):
# doc-debian's manifesto, social contract and constitution. Optional: without it the
# evaluation falls back to /usr/share/common-licenses, which every Debian system has.
if ! dpkg-query -W -f='${Status}' doc-debian 2>/dev/null | grep -q "install ok installed"; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq doc-debian; } >/dev/null 2>&1 ||
    echo "note: doc-debian not installed; oasiskv eval uses the license texts for essay haystacks" >&2
fi

# The training recipe's haystack texts (train/make_texts.py): Python's and Perl's manuals, beside
# the standard library's docstrings, and the Linux man pages (--extra=man; --extra=kernel also
# needs linux-doc-6.1, 190 MB, left to whoever trains). Optional: only training a model (train/)
# and its data test read them.
for p in python3-doc perl-doc manpages manpages-dev; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$p"; } >/dev/null 2>&1 ||
      echo "note: $p not installed; train/make_texts.py makes its texts without it" >&2
  fi
done

# Python references for the tests (the tokenizers package; the openai client; llama.cpp's gguf
# package, whose dequantization checks the loader's; lark, whose Earley parser checks the
# GBNF grammar recognizer)
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import tokenizers, openai, gguf, jsonschema, lark" 2>/dev/null; then
  echo "creating .venv with the test references ..." >&2
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check tokenizers==0.23.3 numpy openai==3.51.0 gguf==0.19.0 jsonschema==4.26.0 lark==1.3.1
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(scripts/cuda_flag.sh) >/dev/null
cmake --build build -j"$(nproc)"

scripts/fetch_model.sh

if [ $run_demo -eq 1 ]; then
  echo "--- oasiskv generate (SmolLM2-135M-Instruct, CPU) ---" >&2
  build/oasiskv generate --chat -p "Write a haiku about the sea." -n 64 --temp 0 
fi
