#!/usr/bin/env python3
"""Make the K-format reference GGUFs under tests/data/models: a tiny random Llama
(`llama_kq`: hidden 256, FFN 512, so that every matrix row is whole 256-element blocks)
quantized by llama.cpp's own `llama-quantize` to the presets users download (Q2_K,
Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, and Q5_1), with greedy tokens and logits computed by
Hugging Face transformers from each quantized file (its GGUF loader dequantizes with the
`gguf` package; the script checks that against its own dequantization of every tensor).
Nothing here comes from OasisKV.

    python tests/py/make_kquant_models.py --quantize /path/to/llama-quantize

Same Python packages as make_reference_models.py (whose helpers it uses); llama-quantize
built from the llama.cpp that ships inside the llama-cpp-python sdist on PyPI (see
tests/data/models/README.md). Deterministic: fixed seeds, one thread."""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_reference_models as mrm  # noqa: E402
import gguf  # noqa: E402
import numpy as np  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

NAME = "llama_kq"
SPEC = dict(
    name=NAME, cls=LlamaForCausalLM, cfg_cls=LlamaConfig, seed=7000,
    prompt_len=40, config_form="rope_parameters", lm_std=1.5,
    cfg=dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=512, vocab_size=mrm.VOCAB,
             max_position_embeddings=256, rms_norm_eps=1e-5,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
             tie_word_embeddings=False),
)
PRESETS = ["Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q5_1", "IQ4_XS"]


def quantize(tool, src, dst, preset):
    r = subprocess.run([tool, src, dst, preset, "1"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("llama-quantize %s failed:\n%s\n%s" % (preset, r.stdout[-2000:], r.stderr[-2000:]))
    return r.stderr + r.stdout


def tensor_types(path):
    return dict(sorted(collections.Counter(t.tensor_type.name for t in gguf.GGUFReader(path).tensors).items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantize", required=True, help="llama.cpp's llama-quantize binary")
    args = ap.parse_args()
    mrm.GGUF_VARIANTS[NAME] = ("llama", [])   # gguf_dequant_model looks the architecture up here
    tok = mrm.build_tokenizer()
    prompt = mrm.make_prompt(SPEC["seed"], SPEC["prompt_len"])
    with tempfile.TemporaryDirectory() as td:
        f32 = os.path.join(td, NAME + ".F32.gguf")
        chosen = None
        for t in range(mrm.MAX_SEED_TRIES):
            seed = SPEC["seed"] + t
            model = mrm.build_model(SPEC, seed)
            toks, logits = mrm.greedy(model, prompt, mrm.N_STEPS)
            if min(mrm.top1_margin(r) for r in logits) < mrm.MARGIN_MIN or len(set(toks)) < mrm.MIN_DISTINCT:
                continue
            mrm.write_gguf(f32, model, "llama", "F32", tok, NAME)
            ok = True
            for p in PRESETS:
                q = os.path.join(td, "%s.%s.gguf" % (NAME, p))
                quantize(args.quantize, f32, q, p)
                qt, ql = mrm.greedy(mrm.gguf_dequant_model(q, SPEC), prompt, mrm.N_STEPS)
                if min(mrm.top1_margin(r) for r in ql) < mrm.MARGIN_MIN_GGUF or len(set(qt)) < mrm.MIN_DISTINCT:
                    ok = False
                    break
            if ok:
                chosen = seed
                break
        if chosen is None:
            raise RuntimeError("no acceptable seed")
        mrm.log("[%s] weight seed %d" % (NAME, chosen))
        for p in PRESETS:
            base = "%s.%s" % (NAME, p)
            tmp = os.path.join(td, base + ".gguf")
            log_text = quantize(args.quantize, f32, tmp, p)
            path = os.path.join(mrm.OUT, base + ".gguf")
            with open(tmp, "rb") as fi, open(path, "wb") as fo:
                fo.write(fi.read())
            mine = mrm.gguf_dequant_model(path, SPEC)
            mtoks, mlogits = mrm.greedy(mine, prompt, mrm.N_STEPS)
            with tempfile.TemporaryDirectory() as td2:
                os.symlink(path, os.path.join(td2, base + ".gguf"))
                tm = mrm.load_eager(td2, gguf_file=base + ".gguf")
                qtoks, qlogits = mrm.greedy(tm, prompt, mrm.N_STEPS)
            d_mine = float(np.abs(qlogits - mlogits).max())
            assert qtoks == mtoks and d_mine < 1e-4, (base, d_mine)
            ver = next((ln.strip() for ln in log_text.splitlines() if "build" in ln.lower()), "unknown")
            extra = {"method": "transformers_gguf_load", "gguf_file": base + ".gguf", "gguf_arch": "llama",
                     "gguf_dtype": p, "weight_seed": chosen, "prompt_seed": SPEC["seed"],
                     "quantized_by": "llama.cpp llama-quantize (F32 GGUF -> %s, 1 thread)" % p,
                     "llama_quantize_build": ver, "tensor_types": tensor_types(path),
                     "eos_in_greedy": mrm.EOS_ID in qtoks, "manual_dequant_max_abs_diff": d_mine,
                     "n_greedy_equal_to_hf_f32": next((i for i, (a, b) in enumerate(zip(qtoks, toks)) if a != b),
                                                      mrm.N_STEPS)}
            mm = mrm.write_reference(os.path.join(mrm.OUT, base + ".reference.json"),
                                     os.path.join(mrm.OUT, base + ".logits.f32"), prompt, qtoks, qlogits, extra)
            mrm.log("[%s] %s, min margin %.4f, own-dequant diff %.3g, equals the F32 model's greedy for %d steps"
                    % (base, extra["tensor_types"], mm, d_mine, extra["n_greedy_equal_to_hf_f32"]))


if __name__ == "__main__":
    main()
