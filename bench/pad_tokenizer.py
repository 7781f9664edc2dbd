#!/usr/bin/env python3
"""A tokenizer.json covering a model's whole vocabulary, for timing runs with random
weights (--load-format dummy): a random model samples every id, and ids the tokenizer
lacks decode to no text (benchmark clients then count the request as failed). The
tokenizer is copied and ids [its size, VOCAB) become plain added tokens "~t<id>" (ASCII,
so byte-level decoding keeps them; '~' is rare in ordinary text, so encoding it is unchanged).

    python3 bench/pad_tokenizer.py IN_TOKENIZER.json VOCAB OUT_DIR
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, vocab, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    d = json.load(open(src, encoding="utf-8"))
    ids = set(d["model"]["vocab"].values()) | {a["id"] for a in d.get("added_tokens", [])}
    n = max(ids) + 1
    if n > vocab:
        sys.exit(f"pad_tokenizer: {src} already has {n} ids, more than {vocab}")
    added = d.setdefault("added_tokens", [])
    for i in range(n, vocab):
        added.append({"id": i, "content": f"~t{i}", "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": False})
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)
    print(f"pad_tokenizer: {n} -> {vocab} ids in {out}/tokenizer.json")


if __name__ == "__main__":
    main()
