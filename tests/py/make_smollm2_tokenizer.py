#!/usr/bin/env python3
"""Write tests/data/smollm2/{tokenizer.json,tokenizer_config.json} from the GGUF.

Run with the reference environment (transformers 5.x, tokenizers, gguf):
    /opt/refenv/bin/python tests/py/make_smollm2_tokenizer.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]

transformers converts the GGUF tokenizer metadata (tokens, merges, pre "smollm")
into a Hugging Face fast tokenizer; we save it and check that the saved
tokenizer.json, loaded back with `tokenizers`, encodes a few probes exactly like
the GGUF-loaded one. The C tests compare against this file."""
import os
import shutil
import sys
import tempfile

from tokenizers import Tokenizer
from transformers import AutoTokenizer

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
gguf_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
out_dir = os.path.join(root, "tests", "data", "smollm2")

tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(gguf_path)),
                                    gguf_file=os.path.basename(gguf_path))
with tempfile.TemporaryDirectory() as tmp:
    tok.save_pretrained(tmp)
    os.makedirs(out_dir, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tmp, name), os.path.join(out_dir, name))

saved = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
probes = ["Hello world!", "12345 apples, 3.14159", "  multiple   spaces\n\n\ttab",
          "don't stop", "héllo wörld 你好 🙂", "<|im_start|>user\nhi<|im_end|>\n",
          "a" * 100 + " " + "9" * 17]
bad = 0
for s in probes:
    a = tok(s, add_special_tokens=False)["input_ids"]
    b = saved.encode(s, add_special_tokens=False).ids
    if a != b:
        bad += 1
        print("MISMATCH", repr(s), a, b)
msgs = [{"role": "user", "content": "Hi"}]
print("chat template renders:", repr(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)))
print(f"{len(probes) - bad}/{len(probes)} probes agree; vocab {saved.get_vocab_size()}")
sys.exit(1 if bad else 0)
