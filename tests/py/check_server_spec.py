"""Speculative decoding in the server: `oasiskv serve --draft ngram` (fixed 4 drafts a step, and
`--spec-adaptive`: 0..8 a step) must return, for concurrent greedy requests, exactly the text of a
server without drafts (and,
asked for logprobs, the same tokens with the same log-probabilities: accepted drafts
take theirs from their verification rows), and count drafts and accepted tokens in
/metrics. Standard library only.
Usage: check_server_spec.py CLI MODEL"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

cli, model = sys.argv[1], sys.argv[2]
PROMPTS = [
    "Count: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2, 3, 4,",
    "The cat sat on the mat. The cat sat on the mat. The cat sat",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
    "Roses are red, violets are blue. Roses are red,",
    "A B C D E F G A B C D E F G A B C",
    "Paris is the capital of France. Berlin is the capital of Germany. Rome is",
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(extra):
    port = free_port()
    p = subprocess.Popen([cli, "serve", "-m", model, "--port", str(port), "--threads", "2", "--max-num-seqs", "8"] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return p, port
        except Exception:
            if p.poll() is not None:
                raise SystemExit("server died: " + p.stderr.read().decode())
            time.sleep(0.1)
    raise SystemExit("server did not start")


def complete(port, prompt, logprobs=None):
    rq = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    if logprobs is not None:
        rq["logprobs"] = logprobs
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(rq).encode(),
                                 {"Content-Type": "application/json"})
    ch = json.load(urllib.request.urlopen(req, timeout=300))["choices"][0]
    return ch["text"] if logprobs is None else (ch["text"], ch["logprobs"])


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.split()[-1])
    return None


procs = []
fails = 0
try:
    plain, p0 = start([])
    procs.append(plain)
    spec, p1 = start(["--draft", "ngram", "--spec-tokens", "4"])
    procs.append(spec)
    adap, p2 = start(["--draft", "ngram", "--spec-tokens", "8", "--spec-adaptive"])
    procs.append(adap)
    with ThreadPoolExecutor(len(PROMPTS)) as ex:
        want = list(ex.map(lambda pr: complete(p0, pr), PROMPTS))
        got = list(ex.map(lambda pr: complete(p1, pr), PROMPTS))
        want_lp = list(ex.map(lambda pr: complete(p0, pr, 2), PROMPTS[:3]))
        got_lp = list(ex.map(lambda pr: complete(p1, pr, 2), PROMPTS[:3]))
        got_ad = list(ex.map(lambda pr: complete(p2, pr), PROMPTS))
    for pr, w, g in zip(PROMPTS, want, got):
        if w != g:
            fails += 1
            print(f"FAIL {pr[:30]!r}: with drafts {g!r}, without {w!r}")
    for pr, w, g in zip(PROMPTS, want, got_ad):
        if w != g:
            fails += 1
            print(f"FAIL {pr[:30]!r}: with adaptive drafts {g!r}, without {w!r}")
    for pr, (wt, wl), (gt, gl) in zip(PROMPTS, want_lp, got_lp):
        same = wt == gt and wl["tokens"] == gl["tokens"] and all(
            abs(a - b) <= 2e-3 for a, b in zip(wl["token_logprobs"], gl["token_logprobs"]))
        if not same:
            fails += 1
            print(f"FAIL {pr[:30]!r}: logprobs with drafts differ from those without")
    drafts = metric(p1, "vllm:spec_decode_num_drafts_total")
    acc = metric(p1, "vllm:spec_decode_num_accepted_tokens_total")
    dt = metric(p1, "vllm:spec_decode_num_draft_tokens_total")
    print(f"drafts {drafts}, draft tokens {dt}, accepted {acc}")
    if not drafts or not acc or acc > dt:
        fails += 1
        print("FAIL: speculative counters did not move as expected")
finally:
    for p in procs:
        p.terminate()
        p.wait(timeout=30)
print(f"{2 * len(PROMPTS) + 4 - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
