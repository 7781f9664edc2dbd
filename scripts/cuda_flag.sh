#!/usr/bin/env bash
# Prints the CMake flags that enable the CUDA backend when nvcc is available (on PATH
# or at /usr/local/cuda), so GPU code is always compiled where it can be; its tests
# skip at run time without a GPU.
nvcc="$(command -v nvcc 2>/dev/null || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
  echo "-DOKV_CUDA=ON -DCMAKE_CUDA_COMPILER=$nvcc"
else
  echo "-DOKV_CUDA=OFF"
fi
