#!/bin/bash
# Planned in session 22 (not run as such: session 23 ran the same loop as part 4 of gpu_run145.sh): the
# peer for the prefill kernels, PyTorch's
# scaled_dot_product_attention (flash, cuDNN, memory-efficient backends) on the shapes of
# cuda_attention --prefill (8B: 32,8,128; SmolLM2: 9,3,64), chunks of 512 and 2048 rows at the end
# of 8K and 32K prompts.
#   bash bench/gpu_run143.sh      (no carry needed; results under $OUT)
set -u
for shape in 32,8,128 9,3,64; do
  timeout 100 python3 bench/torch_prefill_attn.py --rows 512,2048 --ctx 8192,32768 --shape $shape 2>&1 | grep -v Warning
done
