#!/usr/bin/env python3
"""Reference values for tests/test_model.c, computed with the `gguf` Python package
(llama.cpp's gguf-py) from models/SmolLM2-135M-Instruct.Q4_1.gguf.

Run: /opt/refenv/bin/python tests/py/model_ref_values.py [path/to/model.gguf]
Prints C initialisers that are pasted into test_model.c: for a few rows of
token_embd.weight (Q8_0) and blk.0.attn_q.weight (Q4_1), the first 8 values of
the dequantized row, its sum and its sum of squares (float64).
"""
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

here = os.path.dirname(os.path.abspath(__file__))
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
r = GGUFReader(path)
tensors = {t.name: t for t in r.tensors}

def rows(name, which):
    t = tensors[name]
    w = dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0])).astype(np.float64)
    print(f"/* {name} ({t.tensor_type.name}), shape ne={list(map(int, t.shape))} */")
    for i in which:
        row = w[i]
        first = ", ".join(f"{v:.9g}f" for v in row[:8])
        print(f'    {{"{name}", {i}, {{{first}}}, {row.sum():.9g}, {np.square(row).sum():.9g}}},')

def kv(key):
    f = r.fields[key]
    v = f.parts[f.data[0]]
    return bytes(v).decode() if f.types[0].name == "STRING" else v.tolist()

for k in ("general.architecture", "llama.block_count", "llama.context_length", "llama.embedding_length",
          "llama.feed_forward_length", "llama.attention.head_count", "llama.attention.head_count_kv",
          "llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon"):
    print(f"/* {k} = {kv(k)} */")
rows("token_embd.weight", [0, 1, 1000, 49151])
rows("blk.0.attn_q.weight", [0, 575])
rows("blk.29.ffn_down.weight", [7])
