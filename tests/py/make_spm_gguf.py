#!/usr/bin/env python3
"""Make tests/data/tok_llama2/tok_llama2.gguf, a GGUF vocabulary in llama.cpp's SentencePiece layout
(tokenizer.ggml.model "llama": tokens, scores, token types, no merges) from
tests/data/tok_llama2/tokenizer.json, and llama.cpp's own tokenization of the test corpus with it
(tests/data/tok_llama2/llamacpp_ids.json), the reference for the C tokenizer's GGUF path.

    .venv/bin/python tests/py/make_spm_gguf.py --llama-tokenize /path/to/llama-tokenize

Scores: a merged token scores minus its merge rank (the first merge highest), every other token
0, as SentencePiece BPE models order their pieces. llama-tokenize (built from the llama.cpp copy
in the llama-cpp-python 0.3.36 sdist, like llama-quantize: tests/data/models/README.md) loads the
vocabulary only and tokenizes each corpus string from a file, without BOS, with and without
special tokens parsed."""
import argparse
import json
import os
import subprocess
import tempfile

import gguf
from tokenizers import Tokenizer

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
d = os.path.join(root, "tests", "data", "tok_llama2")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-tokenize", required=True)
    args = ap.parse_args()
    tj = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    merges = tj["model"]["merges"]
    n = max(vocab.values()) + 1
    tokens = [None] * n
    for s, i in vocab.items():
        tokens[i] = s
    for a in tj["added_tokens"]:
        tokens[a["id"]] = a["content"]
    scores = [0.0] * n
    for r, m in enumerate(merges):
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        scores[vocab[a + b]] = max(scores[vocab[a + b]], -float(r + 1)) if scores[vocab[a + b]] else -float(r + 1)
    types = []
    for i, s in enumerate(tokens):
        if s == "<unk>":
            types.append(2)
        elif s in ("<s>", "</s>"):
            types.append(3)
        elif len(s) == 6 and s.startswith("<0x") and s.endswith(">"):
            types.append(6)
        else:
            types.append(1)
    path = os.path.join(d, "tok_llama2.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tok_llama2")
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(16)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(vocab["<s>"])
    w.add_eos_token_id(vocab["</s>"])
    w.add_unk_token_id(vocab["<unk>"])
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    corpus = json.load(open(os.path.join(root, "tests", "data", "tokenizer_corpus.json"), encoding="utf-8"))
    out = {"source": "llama.cpp llama-tokenize (llama-cpp-python 0.3.36 sdist), --no-bos --no-escape --ids",
           "plain": [], "special": []}
    with tempfile.TemporaryDirectory() as td:
        f = os.path.join(td, "p.txt")
        for s in corpus:
            with open(f, "wb") as fh:
                fh.write(s.encode("utf-8"))
            for mode, extra in (("plain", ["--no-parse-special"]), ("special", [])):
                if not s:
                    out[mode].append([])
                    continue
                r = subprocess.run([args.llama_tokenize, "-m", path, "-f", f, "--ids", "--no-bos", "--no-escape",
                                    "--log-disable"] + extra, capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(r.stderr[-500:])
                line = [ln for ln in r.stdout.splitlines() if ln.startswith("[")][-1]
                out[mode].append(json.loads(line))
    with open(os.path.join(d, "llamacpp_ids.json"), "w") as fh:
        json.dump(out, fh)
    ref = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    same = sum(ref.encode(s, add_special_tokens=False).ids == ids for s, ids in zip(corpus, out["special"]))
    print(f"{path}: {n} tokens; llama.cpp's ids for {len(corpus)} strings; {same} equal the tokenizer.json's (tokenizers)")


if __name__ == "__main__":
    main()
