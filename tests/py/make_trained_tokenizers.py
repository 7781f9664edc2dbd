#!/usr/bin/env python3
"""Train two small byte-level BPE tokenizers with Hugging Face tokenizers, one with
Llama-3's pre-tokenizer and one with Qwen2's, and save them as
tests/data/tok_llama3/tokenizer.json and tests/data/tok_qwen2/tokenizer.json.
They exercise the C tokenizer's Split-regex pre-tokenizers against the reference.

    .venv/bin/python tests/py/make_trained_tokenizers.py

Both use the real models' pre_tokenizer config (Split with the regex, Isolated,
then ByteLevel without its own regex) and ByteLevel decoder; Llama-3's sets
model.ignore_merges and a TemplateProcessing post-processor adding
<|begin_of_text|>, as Meta's file does. Neither has Qwen2's NFC normalizer (the C
tokenizer does not normalise). Each has one non-special added token, <custom>,
which tokenizers matches even with special tokens off. The training text is the
test corpus plus some of Python's standard library, so the vocabulary has
merges across code, prose, digits and several scripts."""
import glob
import json
import os
import sysconfig

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def training_text():
    with open(os.path.join(root, "tests", "data", "tokenizer_corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    texts = list(corpus)
    stdlib = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(os.path.join(stdlib, "*.py")))[:60]:
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    return texts


def build(name, pattern, specials, bos, ignore_merges, vocab_size):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer)
    tok.add_tokens([AddedToken("<custom>", special=False, normalized=False)])
    if bos:
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, tok.token_to_id(bos))]),
        ])
    out_dir = os.path.join(root, "tests", "data", name)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path, pretty=False)
    print(f"{path}: vocab {tok.get_vocab_size()}, {os.path.getsize(path)} bytes")


build("tok_llama3", LLAMA3,
      ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
      "<|begin_of_text|>", True, 6000)
build("tok_qwen2", QWEN2, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, False, 6000)
