#!/usr/bin/env python3
"""Compare the C tokenizer with Hugging Face tokenizers over the test corpus.

For each (C source, reference tokenizer.json) pair, every corpus string is encoded
by both with special tokens parsed and with special tokens as plain text (tokenizers'
encode_special_tokens), never adding BOS; the id lists must be equal. The C side
also checks decode(encode(s)) == s. The C ids come from okv_tok_dump ($OKV_TOK_DUMP).

Exit status: 0 all equal; 1 any mismatch or error; 77 skipped (tokenizers missing,
or every other source agreed but the GGUF model file is absent)."""
import json
import os
import subprocess
import sys

try:
    from tokenizers import Tokenizer
except ImportError:
    print("SKIP: the Python package `tokenizers` is not installed in this interpreter")
    sys.exit(77)

src_dir = os.environ.get("OKV_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
dump = os.environ.get("OKV_TOK_DUMP")
if not dump or not os.access(dump, os.X_OK):
    print(f"FAIL: OKV_TOK_DUMP ({dump!r}) is not an executable okv_tok_dump")
    sys.exit(1)
data = os.path.join(src_dir, "tests", "data")
corpus_path = os.path.join(data, "tokenizer_corpus.json")
with open(corpus_path, encoding="utf-8") as f:
    corpus = json.load(f)
gguf = os.path.join(src_dir, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

# (label, C source, reference tokenizer.json)
pairs = [
    ("smollm2 gguf", gguf, os.path.join(data, "smollm2", "tokenizer.json")),
    ("smollm2 tokenizer.json", os.path.join(data, "smollm2", "tokenizer.json"), os.path.join(data, "smollm2", "tokenizer.json")),
    ("smollm2 hf dir", os.path.join(data, "smollm2"), os.path.join(data, "smollm2", "tokenizer.json")),
    ("llama3-style tokenizer.json", os.path.join(data, "tok_llama3", "tokenizer.json"), os.path.join(data, "tok_llama3", "tokenizer.json")),
    ("qwen2-style tokenizer.json", os.path.join(data, "tok_qwen2", "tokenizer.json"), os.path.join(data, "tok_qwen2", "tokenizer.json")),
    ("llama2-style (SentencePiece BPE) tokenizer.json", os.path.join(data, "tok_llama2", "tokenizer.json"), os.path.join(data, "tok_llama2", "tokenizer.json")),
    ("mistral-style (SentencePiece BPE, Metaspace) tokenizer.json", os.path.join(data, "tok_mistral", "tokenizer.json"), os.path.join(data, "tok_mistral", "tokenizer.json")),
]
# SentencePiece-style tokenizers prepend a space to the text (and decoding drops one), so
# decode(encode(s)) == s does not hold for them in tokenizers either: their decode is compared
# with tokenizers' decode of the same ids instead (as every source's is)
SPM = ("SentencePiece",)

failed = False
gguf_missing = False
print(f"corpus: {len(corpus)} strings ({corpus_path})")
for label, c_src, ref_path in pairs:
    if not os.path.exists(c_src):
        if c_src == gguf:
            print(f"{label}: SKIP, {gguf} is missing (scripts/fetch_model.sh fetches it)")
            gguf_missing = True
            continue
        print(f"{label}: FAIL, {c_src} is missing")
        failed = True
        continue
    ref = Tokenizer.from_file(ref_path)
    want = {}
    ref.encode_special_tokens = True
    want["plain"] = [e.ids for e in ref.encode_batch(corpus, add_special_tokens=False)]
    ref.encode_special_tokens = False
    want["special"] = [e.ids for e in ref.encode_batch(corpus, add_special_tokens=False)]

    proc = subprocess.run([dump, c_src, corpus_path], capture_output=True)
    if proc.returncode != 0:
        print(f"{label}: FAIL, okv_tok_dump exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}")
        failed = True
        continue
    got = json.loads(proc.stdout)
    counts = {}
    for mode in ("plain", "special"):
        bad = [i for i in range(len(corpus)) if got[mode][i] != want[mode][i]]
        counts[mode] = len(bad)
        for i in bad[:5]:
            g, w = got[mode][i], want[mode][i]
            k = next((j for j in range(min(len(g), len(w))) if g[j] != w[j]), min(len(g), len(w)))
            print(f"  {mode} mismatch #{i} {corpus[i][:60]!r}: first difference at {k}: "
                  f"C {[ref.id_to_token(x) for x in g[k:k + 4]]} vs ref {[ref.id_to_token(x) for x in w[k:k + 4]]}")
    rt = [] if "SentencePiece" in label else got["roundtrip_fail"]
    n_ids = sum(len(x) for x in got["special"])
    # decode: the C decoder's bytes (special tokens kept) against tokenizers' decode of the same ids
    dec_bad = [i for i in range(len(corpus))
               if bytes.fromhex(got["decoded_hex"][i]).decode("utf-8", errors="replace")
               != ref.decode(want["special"][i], skip_special_tokens=False)]
    for i in dec_bad[:5]:
        print(f"  decode mismatch #{i}: C {bytes.fromhex(got['decoded_hex'][i])[:60]!r} vs ref "
              f"{ref.decode(want['special'][i], skip_special_tokens=False)[:60]!r}")
    counts["decode"] = len(dec_bad)
    ok = counts["plain"] == 0 and counts["special"] == 0 and not rt and not dec_bad
    failed |= not ok
    print(f"{label}: {'ok' if ok else 'FAIL'}: mismatches plain={counts['plain']} special={counts['special']} "
          f"decode={counts['decode']} "
          f"of {len(corpus)}; decode(encode(s)) != s: {len(rt)}; {n_ids} ids, C encode {got['encode_seconds'] * 1e3:.1f} ms")
    for i in rt[:5]:
        print(f"  roundtrip failure #{i} {corpus[i][:60]!r}")

# A GGUF vocabulary in llama.cpp's SentencePiece layout ("llama": scores, no merges) against llama.cpp's own
# tokenization of the corpus (tests/py/make_spm_gguf.py ran llama-tokenize; it is not in this environment)
spm_gguf = os.path.join(data, "tok_llama2", "tok_llama2.gguf")
with open(os.path.join(data, "tok_llama2", "llamacpp_ids.json")) as f:
    llamacpp = json.load(f)
proc = subprocess.run([dump, spm_gguf, corpus_path], capture_output=True)
if proc.returncode != 0:
    print(f"llama2-style GGUF (llama.cpp): FAIL, okv_tok_dump exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    failed = True
else:
    got = json.loads(proc.stdout)
    bad = {mode: [i for i in range(len(corpus)) if got[mode][i] != llamacpp[mode][i]] for mode in ("plain", "special")}
    for mode in bad:
        for i in bad[mode][:5]:
            print(f"  {mode} mismatch #{i} {corpus[i][:60]!r}: C {got[mode][i][:12]} vs llama.cpp {llamacpp[mode][i][:12]}")
    ok = not bad["plain"] and not bad["special"]
    failed |= not ok
    print(f"llama2-style GGUF (SentencePiece scores) against llama.cpp: {'ok' if ok else 'FAIL'}: mismatches "
          f"plain={len(bad['plain'])} special={len(bad['special'])} of {len(corpus)}")

if failed:
    sys.exit(1)
if gguf_missing:
    print("SKIP: all tokenizer.json sources agree, but the GGUF source was not tested")
    sys.exit(77)
print("all sources agree with tokenizers")
