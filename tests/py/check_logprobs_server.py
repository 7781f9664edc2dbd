"""Log-probabilities of `oasiskv serve` on any device (the GPU machine runs it with
`--device cuda`; tests/py/test_server.py covers the CPU in CI). Standard library only.

A dense server: a greedy completion with logprobs, then its prompt + generated tokens
resubmitted with echo and logprobs (what lm-evaluation-harness sends): the prompt
entries of the resubmitted tokens must equal their logprobs when generated, and each
greedy token must be its own top alternative; chat logprobs with top_logprobs. A sparse
server (--kv-budget): the prompt entries must equal the dense server's (prefill reads
every block).
Usage: check_logprobs_server.py CLI MODEL DEVICE [KV_BUDGET]"""
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

cli, model, device = sys.argv[1], sys.argv[2], sys.argv[3]
budget = sys.argv[4] if len(sys.argv) > 4 else "128"
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    fails += 0 if cond else 1


def start(extra):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen([cli, "serve", "-m", model, "--port", str(port), "--device", device, "--kv-pool-gb", "1"] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return p, port
        except Exception:  # noqa: BLE001
            if p.poll() is not None:
                raise SystemExit("server died: " + p.stderr.read().decode())
            time.sleep(0.1)
    raise SystemExit("server did not start")


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=300))


words = ("the river runs past the old mill and the miller counts the sacks of grain "
         "while the children play by the water until the evening bell rings ").split()
prompt = " ".join(words[i % len(words)] for i in range(180))
procs = []
try:
    dense, pd = start([])
    procs.append(dense)
    js = post(pd, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                                      "logprobs": 2})
    lp = js["choices"][0]["logprobs"]
    check(len(lp["tokens"]) == 8 and all(v <= 0 and max(d.values()) == v for v, d in
                                          zip(lp["token_logprobs"], lp["top_logprobs"])),
          "dense: 8 generated entries, each greedy token its own top alternative")
    full = prompt + js["choices"][0]["text"]
    js2 = post(pd, "/v1/completions", {"prompt": full, "max_tokens": 1, "temperature": 0, "logprobs": 1, "echo": True})
    lp2 = js2["choices"][0]["logprobs"]
    n = len(lp2["tokens"])
    tail = lp2["token_logprobs"][n - 1 - 8:n - 1]
    check(lp2["token_logprobs"][0] is None and lp2["tokens"][n - 1 - 8:n - 1] == lp["tokens"]
          and all(abs(a - b) <= 2e-2 for a, b in zip(tail, lp["token_logprobs"])),
          f"dense: echo of prompt + completion ({n - 1} prompt entries): the completion's entries equal its logprobs "
          f"(largest difference {max(abs(a - b) for a, b in zip(tail, lp['token_logprobs'])):.2e})")
    try:
        js3 = post(pd, "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt[:200]}], "max_tokens": 4,
                                                "temperature": 0, "ignore_eos": True, "logprobs": True,
                                                "top_logprobs": 3})
        content = js3["choices"][0]["logprobs"]["content"]
        check(len(content) == 4 and all(len(c["top_logprobs"]) == 3 and c["top_logprobs"][0]["logprob"] == c["logprob"]
                                        for c in content), "dense: chat logprobs with 3 top alternatives")
    except urllib.error.HTTPError as ex:
        msg = ex.read().decode()
        check(ex.code == 400 and "template" in msg, f"dense: chat skipped, the model has no chat template ({msg[:80]})")
    dense.terminate()
    dense.wait(timeout=30)
    sparse, ps = start(["--kv-budget", budget])
    procs.append(sparse)
    js4 = post(ps, "/v1/completions", {"prompt": full, "max_tokens": 1, "temperature": 0, "logprobs": 1, "echo": True})
    lp4 = js4["choices"][0]["logprobs"]
    diff = max(abs(a - b) for a, b in zip(lp4["token_logprobs"][1:n - 1], lp2["token_logprobs"][1:n - 1]))
    check(lp4["tokens"][:n - 1] == lp2["tokens"][:n - 1] and diff <= 5e-2,
          f"sparse (--kv-budget {budget}): the prompt entries equal the dense server's (largest difference {diff:.2e})")
finally:
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=30)
print(f"{fails} failed")
sys.exit(1 if fails else 0)
