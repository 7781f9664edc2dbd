#!/usr/bin/env python3
"""Write tests/data/smollm2/{tokenizer.json,tokenizer_config.json} from the GGUF.

Run with the reference environment (transformers 5.x, tokenizers, gguf):
    /opt/refenv/bin/python tests/py/make_smollm2_tokenizer.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]

transformers converts the GGUF tokenizer metadata (tokens, merges, pre "smollm")
into a Hugging Face fast tokenizer; we save it and check that the saved
tokenizer.json, loaded back with `tokenizers`, encodes a few probes exactly like
the GGUF-loaded one. The C tests compare against this file.

One correction: transformers' GGUF converter ignores tokenizer.ggml.pre ("smollm")
and writes a plain ByteLevel pre-tokenizer. SmolLM2's own tokenizer.json (and
llama.cpp's "smollm" pre-tokenizer) first isolates every numeric character
(Digits, individual_digits) and then applies ByteLevel. The two differ where a
space precedes a numeric character that is not an ASCII digit (" ½": plain
ByteLevel gives "ĠÂ" "½", SmolLM2 gives "Ġ" "Â½"), so we write SmolLM2's own
pre-tokenizer into the saved file. The chat template (transformers 5 saves it as
chat_template.jinja) is also stored in tokenizer_config.json, the older layout."""
import json
import os
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
    with open(os.path.join(tmp, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tj["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ],
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(tmp, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.pop("is_local", None)
    cfg["chat_template"] = tok.chat_template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)

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
# Where the converter's plain ByteLevel and SmolLM2's Digits+ByteLevel part ways.
s = " ½ cup"
print("note: transformers-from-GGUF", tok.tokenize(s), "vs saved (SmolLM2 pre-tokenizer)",
      saved.encode(s, add_special_tokens=False).tokens)
msgs = [{"role": "user", "content": "Hi"}]
print("chat template renders:", repr(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)))
print(f"{len(probes) - bad}/{len(probes)} probes agree; vocab {saved.get_vocab_size()}")
sys.exit(1 if bad else 0)
