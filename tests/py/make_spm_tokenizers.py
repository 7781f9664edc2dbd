#!/usr/bin/env python3
"""Train two small SentencePiece-style BPE tokenizers with Hugging Face tokenizers, laid out
as the Llama 2 and Mistral 7B tokenizer.json files are, and save them as
tests/data/tok_llama2/tokenizer.json and tests/data/tok_mistral/tokenizer.json.

    .venv/bin/python tests/py/make_spm_tokenizers.py

Both: model BPE with byte_fallback (the 256 "<0xNN>" tokens in the vocabulary, right after
<unk> <s> </s>, as in Llama 2's), fuse_unk, merges over characters (not bytes), "▁" (U+2581)
for spaces. Llama 2's layout: normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
pre-tokenizer, decoder Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)].
Mistral's (v0.3 and later conversions): no normalizer, pre-tokenizer Metaspace("▁",
prepend_scheme "first", split false), the same decoder. Each has a post-processor adding
<s>, and Mistral's the [INST] / [/INST] control tokens. Training text: the test corpus plus
some of Python's standard library (prose, code, digits, several scripts)."""
import glob
import json
import os
import sysconfig

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def training_text():
    with open(os.path.join(root, "tests", "data", "tokenizer_corpus.json"), encoding="utf-8") as f:
        texts = list(json.load(f))
    stdlib = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(os.path.join(stdlib, "*.py")))[:60]:
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    return texts


def build(name, layout, extra_specials, vocab_size):
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if layout == "llama2":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False, special_tokens=specials,
                                  limit_alphabet=300)
    if layout == "llama2":
        tok.train_from_iterator(training_text(), trainer)
    else:   # the trainer needs the spaces as "▁" here (no normalizer does it)
        tok.train_from_iterator([t.replace(" ", "▁") for t in training_text()], trainer)
    # the byte tokens are ordinary vocabulary entries in Llama 2's file, not added tokens
    d = json.loads(tok.to_str())
    d["added_tokens"] = [a for a in d["added_tokens"] if not a["content"].startswith("<0x")]
    tok = Tokenizer.from_str(json.dumps(d))
    if extra_specials:
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in extra_specials])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    out_dir = os.path.join(root, "tests", "data", name)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    print(f"{path}: {tok.get_vocab_size()} tokens")


build("tok_llama2", "llama2", [], 2000)
build("tok_mistral", "mistral", ["[INST]", "[/INST]"], 2000)
