#!/usr/bin/env python3
"""A trained model's language-model loss on text it was and was not trained on: a check for text
learned by heart (session 31: run 12 had 4.4 nats on its training texts against 6.7 held out).

    python3 train/lm_loss.py MODEL_DIR NAME=FOLDER_OR_FILE... [--windows 8] [--len 1024] [--seed 0]

For each set: the files of the folder (or the one file; .gz read too) joined as paragraphs, tokenized
with train/tokenizer, WINDOWS windows of LEN tokens at random offsets (after BOS); prints the mean
cross-entropy of positions LEN/4 .. LEN-1 (the model has some context there). Needs torch, numpy,
safetensors, tokenizers. E.g. (session 31's figures):

    python3 train/lm_loss.py train/checkpoints/run14/target train=/tmp/okv_train_texts2/train \\
        heldout=/tmp/okv_train_texts2/heldout licenses=/usr/share/common-licenses
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train as T  # noqa: E402  (the model class and its loader)


def read(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("sets", nargs="+", help="NAME=FOLDER or NAME=FILE")
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--len", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(os.path.join(HERE, "tokenizer", "tokenizer.json"))
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    model = T.Llama(cfg)
    T.load_model(model, a.model)
    model.eval()
    bos = cfg.get("bos_token_id", 1)
    for spec in a.sets:
        name, _, path = spec.partition("=")
        if not path or not os.path.exists(path):
            sys.exit(f"lm_loss.py: '{spec}' is not NAME=FOLDER_OR_FILE of an existing path")
        files = [os.path.join(path, n) for n in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
        files = [p for p in files if os.path.isfile(p)]
        ids = np.asarray(tk.encode("\n\n".join(read(p) for p in files), add_special_tokens=False).ids)
        if len(ids) < a.len:
            print(f"{name:12s} {len(ids)} tokens: shorter than one window, skipped")
            continue
        rng = np.random.default_rng(a.seed)   # the same offsets for every model
        losses = []
        for _ in range(a.windows):
            st = int(rng.integers(0, len(ids) - a.len + 1))
            x = torch.tensor(np.concatenate([[bos], ids[st:st + a.len - 1]]))[None]
            with torch.no_grad():
                lg = model.logits(model.hidden(x))[0, :-1].float()
            ce = F.cross_entropy(lg, x[0, 1:], reduction="none")
            losses.append(ce[a.len // 4:].mean().item())
        print(f"{name:12s} {len(ids):9d} tokens, {a.windows} windows: LM loss {np.mean(losses):.3f} nats "
              f"(min {min(losses):.2f}, max {max(losses):.2f})")


if __name__ == "__main__":
    main()
