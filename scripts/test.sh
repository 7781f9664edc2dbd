#!/usr/bin/env bash
# Build (if needed) and run the whole test suite with ctest. Extra arguments go to
# ctest (e.g. -L unit, -R tokenizer). GPU tests (label cuda) skip without a GPU.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(scripts/cuda_flag.sh) >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure --timeout 900 "$@"
