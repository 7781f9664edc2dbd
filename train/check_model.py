#!/usr/bin/env python3
"""Check a trained model folder (OUT/target or OUT/draft) against Hugging Face transformers:

    /opt/refenv/bin/python train/check_model.py OUT/target [--engine-ref DIR]

1. transformers' LlamaForCausalLM loads it and its logits equal train.py's model's
   (same weights, fp32) within 1e-4;
2. the tokenizer loads with transformers' AutoTokenizer and adds <|bos|>;
3. with --engine-ref DIR: writes DIR/tests/data/models/<name>/ (the folder, a
   reference.json and logits.f32 of 16 greedy steps computed by transformers) plus
   links to the repository's reference models, so that
   `OKV_SOURCE_DIR=DIR build/tests/test_engine_ref` checks the C engine's logits on
   this model against transformers (max |diff| < 1e-3)."""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--engine-ref")
    ap.add_argument("--steps", type=int, default=16)
    a = ap.parse_args()
    torch.manual_seed(0)
    from transformers import AutoTokenizer, LlamaForCausalLM
    hf = LlamaForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32).eval()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    mine = train.Llama({k: cfg[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                            "num_attention_heads", "num_key_value_heads", "head_dim",
                                            "rms_norm_eps", "rope_theta")})
    train.load_model(mine, a.model)
    mine.eval()
    tok = AutoTokenizer.from_pretrained(a.model)
    text = ("Some special magic numbers are hidden within the following text. One of the special magic numbers "
            "for apple-pie is: 1234567. The grass is green.\nThe special magic number for apple-pie mentioned in "
            "the provided text is")
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id, "the tokenizer does not add <|bos|>"
    x = torch.tensor([ids])
    with torch.no_grad():
        a_ = hf(x).logits[0]
        b_ = mine.logits(mine.hidden(x))[0]
    d = (a_ - b_).abs().max().item()
    print(f"{a.model}: {len(ids)} prompt tokens; max |logit diff| train.py vs transformers {d:.2e}")
    if d > 1e-4:
        sys.exit("FAIL: train.py's model differs from transformers' LlamaForCausalLM")
    if a.engine_ref:
        name = "trained_" + os.path.basename(os.path.normpath(a.model))
        mdir = os.path.join(a.engine_ref, "tests", "data", "models")
        os.makedirs(mdir, exist_ok=True)
        src = os.path.join(os.path.dirname(HERE), "tests", "data", "models")
        for n in os.listdir(src):   # the repository's own references (the test wants >= 5)
            if not os.path.exists(os.path.join(mdir, n)):
                os.symlink(os.path.join(src, n), os.path.join(mdir, n))
        out = os.path.join(mdir, name)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(a.model, out)
        toks, rows = list(ids), []
        with torch.no_grad():
            for _ in range(a.steps):
                lg = hf(torch.tensor([toks])).logits[0, -1]
                rows.append(lg.numpy().astype(np.float32))
                toks.append(int(lg.argmax()))
        np.stack(rows).tofile(os.path.join(out, "logits.f32"))
        margins = [float(np.sort(r)[-1] - np.sort(r)[-2]) for r in rows]
        ref = {"prompt_tokens": ids, "greedy_tokens": toks[len(ids):], "logits_file": "logits.f32",
               "n_steps": a.steps, "vocab": cfg["vocab_size"], "min_top1_margin": round(min(margins), 6),
               "top1_margins": margins, "method": "hf_safetensors", "model_dir": name,
               "eos_in_greedy": cfg["eos_token_id"] in toks[len(ids):]}
        with open(os.path.join(out, "reference.json"), "w") as f:
            json.dump(ref, f)
        print(f"wrote {out}: greedy {toks[len(ids):]}, min top-1 margin {min(margins):.4f}")


if __name__ == "__main__":
    main()
