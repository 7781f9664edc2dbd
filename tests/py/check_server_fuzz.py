"""Malformed requests against `oasiskv serve` (run by tests/sh/test_server_fuzz.sh): valid requests of every endpoint
and feature (completions, chat, structured output with a JSON schema, a regex and a Lark grammar, tools, the legacy
functions, the Responses API with stored responses, best_of, /tokenize, /detokenize, vLLM's extras), mutated at the
JSON level (keys dropped, values replaced by other types, huge, empty or odd strings, damaged grammars) and at the byte
level, seeded; and GET / DELETE / OPTIONS of stored responses and their input items with odd ids, query strings and
CORS headers. Every reply must
be an HTTP status below 500 (503 while stopping aside) with a body that parses (JSON, or an event stream of UTF-8), and
the server must be up at the end and exit cleanly on SIGTERM. Built with AddressSanitizer, the same finds memory
errors (bench/RESULTS.md section 61: 1,500 release and 300 ASan requests, none).
usage: check_server_fuzz.py CLI MODEL SEED N   (FUZZ_SHORT=1: replies of at most 2 tokens, for slow builds)"""
import os, json, random, socket, subprocess, sys, time, urllib.request, urllib.error, http.client
cli, model, seed, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
err_path = f"/tmp/okv_fuzz_{os.getpid()}.err"
p = subprocess.Popen([cli, "serve", "-m", model, "--port", str(port), "--max-model-len", "1024", "--threads", "2"],
                     stdout=subprocess.DEVNULL, stderr=open(err_path, "w"))
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
        break
    except Exception:
        time.sleep(0.2)
else:
    print("FAILED: the server did not start:", open(err_path).read()[-2000:])
    p.kill()
    sys.exit(1)
W = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}, "required": ["city"]}}}
BASE = [
    ("/v1/completions", {"prompt": "The sky is", "max_tokens": 4, "temperature": 0}),
    ("/v1/completions", {"prompt": [[1, 2, 3], "a b"], "max_tokens": 3, "logprobs": 2, "echo": True, "n": 2}),
    ("/v1/completions", {"prompt": "x", "max_tokens": 3, "prompt_logprobs": 3, "truncate_prompt_tokens": 2,
                         "include_stop_str_in_output": True, "stop": ["a"], "return_tokens_as_token_ids": True}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True,
                              "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                              "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                                  "type": "object", "properties": {"a": {"type": "integer"}}}}}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                              "guided_grammar": "start: \"a\" B+\nB: /[0-9]/\n%ignore \" \""}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                              "guided_regex": "[a-z]{2,4}!", "logprobs": True, "top_logprobs": 2}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 20,
                              "tools": [W], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 20,
                              "functions": [W["function"]], "function_call": {"name": "get_weather"}, "stream": True}),
    ("/v1/responses", {"input": "Hi", "max_output_tokens": 5}),
    ("/v1/responses", {"input": [{"role": "user", "content": "More?"}], "previous_response_id": "@", "store": True,
                       "max_output_tokens": 4}),
    ("/v1/responses", {"input": "Go on.", "background": True, "max_output_tokens": 6}),
    ("/v1/completions", {"prompt": "x", "max_tokens": 3, "best_of": 3, "n": 2, "temperature": 0.8, "logprobs": 1}),
    ("/tokenize", {"messages": [{"role": "user", "content": "Hi"}]}),
    ("/detokenize", {"tokens": [1, 2, 3]}),
]
VALUES = [None, True, False, 0, -1, 1, 2**31, 2**63, -2**63, 1e308, -0.0, 0.5, "", "x", "\u0000", "\ud7ff\U0010ffff",
          [], [1], [[]], {}, {"a": 1}, "a" * 5000, [0] * 3000, "root ::= x", "start: start"]
KEYS = ["prompt", "messages", "max_tokens", "n", "stream", "logprobs", "top_logprobs", "echo", "stop", "seed",
        "temperature", "top_p", "top_k", "min_p", "logit_bias", "tools", "tool_choice", "functions", "function_call",
        "response_format", "guided_json", "guided_regex", "guided_grammar", "guided_choice", "structured_outputs",
        "prompt_logprobs", "truncate_prompt_tokens", "skip_special_tokens", "include_stop_str_in_output",
        "min_tokens", "stop_token_ids", "allowed_token_ids", "bad_words", "chat_template_kwargs", "input",
        "max_output_tokens", "tokens", "add_generation_prompt", "continue_final_message", "stream_options",
        "presence_penalty", "repetition_penalty", "parallel_tool_calls", "reasoning_effort", "text", "instructions",
        "best_of", "previous_response_id", "store", "background"]
stored = []   # ids of the responses made so far (stored unless a request said store: false)


def other_request():
    """a GET, DELETE or OPTIONS of a stored response (or a made-up id), with odd query strings and CORS headers"""
    rid = rng.choice(stored) if stored and rng.random() < 0.7 else rng.choice(["resp_x", "", "%00", "a" * 300, "..", "@"])
    path = "/v1/responses/" + rid + rng.choice(["", "/input_items", "/input_items/", "/other", "/", "/cancel"])
    if rng.random() < 0.6:
        q = [f"{k}={rng.choice(['0', '1', '100', '101', '-5', 'asc', 'desc', 'x', '', '%ff', 'msg_1'])}"
             for k in rng.sample(["limit", "order", "after", "x"], rng.randint(1, 3))]
        path += "?" + "&".join(q)
    method = rng.choice(["GET", "DELETE", "OPTIONS", "PUT", "HEAD", "POST"])
    headers = {}
    if rng.random() < 0.5:
        headers["Origin"] = rng.choice(["http://a.example", "null", "", "x" * 500])
    if method == "OPTIONS" and rng.random() < 0.7:
        headers["Access-Control-Request-Method"] = rng.choice(["POST", "GET", "", "BREW"])
        if rng.random() < 0.5:
            headers["Access-Control-Request-Headers"] = rng.choice(["authorization, content-type", ",,,", "x" * 300, ""])
    return method, path, headers

def mutate(v, depth=0):
    if isinstance(v, dict) and v and rng.random() < 0.7:
        v = dict(v)
        k = rng.choice(list(v))
        r = rng.random()
        if r < 0.3: del v[k]
        elif r < 0.6: v[k] = mutate(v[k], depth + 1)
        else: v[rng.choice(KEYS)] = rng.choice(VALUES) if rng.random() < 0.6 else mutate(rng.choice(list(v.values())), depth + 1)
        return v
    if isinstance(v, list) and v and rng.random() < 0.7:
        v = list(v); i = rng.randrange(len(v))
        r = rng.random()
        if r < 0.3: del v[i]
        elif r < 0.7: v[i] = mutate(v[i], depth + 1)
        else: v.insert(i, rng.choice(VALUES))
        return v
    if isinstance(v, str) and v and rng.random() < 0.5:
        i = rng.randrange(len(v)); return v[:i] + rng.choice(["\"", "\\", "(", "[", "{", "\n", "é", "\ufffd", "::=", "|"]) + v[i + 1:]
    return rng.choice(VALUES)

bad = 0
for k in range(n):
    if rng.random() < 0.12:
        method, path, headers = other_request()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request(method, path, headers=headers)
            r = c.getresponse(); raw = r.read()
            if r.status >= 500:
                print("5xx", r.status, method, path[:200], raw[:200], flush=True); bad += 1
            if method != "HEAD" and r.getheader("Content-Type", "").startswith("application/json"):
                json.loads(raw.decode("utf-8"))
            c.close()
        except Exception as ex:
            print("EXC", type(ex).__name__, ex, method, path[:200], flush=True); bad += 1
            if p.poll() is not None:
                print("SERVER DIED rc", p.returncode, flush=True); break
        continue
    path, body = rng.choice(BASE)
    if isinstance(body, dict) and body.get("previous_response_id") == "@":
        body = dict(body, previous_response_id=rng.choice(stored) if stored else "resp_none")
    for _ in range(rng.choice([0, 1, 1, 2, 3])):   # (a few left whole: stored responses to go on from)
        body = mutate(body)
    if isinstance(body, dict):   # replies kept short (a build with AddressSanitizer decodes ~1 token a second)
        main_key = "max_output_tokens" if path == "/v1/responses" else "max_tokens"   # (the other one: kept if there)
        for key in ("max_tokens", "max_output_tokens"):
            v = body.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v > 12:
                if key in body or key == main_key:
                    body[key] = rng.choice([1, 4, 12, v]) if not isinstance(v, int) or isinstance(v, bool) else 12
        for key in ("max_tokens", "max_output_tokens"):
            if os.environ.get("FUZZ_SHORT") and isinstance(body.get(key), int) and body[key] > 2:
                body[key] = 2
        if os.environ.get("FUZZ_SHORT") and not isinstance(body.get(main_key), int):
            body[main_key] = 2   # a null or other value would mean the default length
    data = json.dumps(body).encode()
    if rng.random() < 0.15:   # byte-level damage
        b = bytearray(data); i = rng.randrange(len(b)); b[i:i + rng.randint(0, 3)] = bytes([rng.randrange(256)])
        data = bytes(b)
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse(); raw = r.read()
        if r.status >= 500 and r.status != 503:
            print("5xx", r.status, path, data[:300], raw[:200], flush=True); bad += 1
        if r.getheader("Content-Type", "").startswith("application/json"):
            js = json.loads(raw.decode("utf-8"))
            if path == "/v1/responses" and r.status == 200 and isinstance(js, dict) and js.get("store") is True:
                stored.append(js["id"])
        elif r.getheader("Content-Type", "").startswith("text/event-stream"):
            raw.decode("utf-8")
        c.close()
    except Exception as ex:
        print("EXC", type(ex).__name__, ex, path, data[:300], flush=True); bad += 1
        if p.poll() is not None:
            print("SERVER DIED rc", p.returncode, flush=True); break
alive = p.poll() is None
print(f"{k + 1} mutated requests ({len(stored)} stored responses made): {bad} bad replies; server {'up' if alive else 'gone'}", flush=True)
p.terminate()
rc = p.wait(timeout=120)
log = open(err_path).read()
os.unlink(err_path)
if rc != 0 or "ERROR: AddressSanitizer" in log or "runtime error:" in log:
    print(f"server exit {rc}:\n{log[-3000:]}", flush=True)
    bad += 1
print("all passed" if bad == 0 and alive else "FAILED", flush=True)
sys.exit(0 if bad == 0 and alive else 1)
