"""Prompts that share a long prefix (a system prompt, a document several questions are asked
about), for benchmarking prefix caching with `oasiskv bench serve --dataset FILE`.

    python3 bench/make_prefix_prompts.py N PREFIX_WORDS SUFFIX_WORDS OUT.jsonl [SEED]

Every prompt is the same PREFIX_WORDS random words, then "Question i:" and SUFFIX_WORDS words of
its own (JSON lines with a "prompt" field)."""
import json
import random
import sys

n, pw, sw, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 0)
words = ("harbour boat river stone light window garden letter morning winter market bridge candle forest "
         "paper music silver orange yellow quiet rapid narrow distant gentle ancient simple hidden").split()
prefix = " ".join(rng.choice(words) for _ in range(pw))
with open(out, "w") as f:
    for i in range(n):
        suffix = " ".join(rng.choice(words) for _ in range(sw))
        f.write(json.dumps({"prompt": f"{prefix}\nQuestion {i}: {suffix}"}) + "\n")
