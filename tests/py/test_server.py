"""Black-box test of `oasiskv serve` (run by tests/sh/test_server.sh).

Starts real servers on 127.0.0.1 (any free port) with the SmolLM2-135M GGUF and
checks, as clients see them: completions and chat completions, streamed and not,
usage counts (against the Hugging Face tokenizer), stop strings, several choices (a list
of prompts, n > 1), logprobs (completions,
echo of the prompt's, chat's top_logprobs; streamed and not), the official
`openai` client, 64 concurrent streams whose greedy outputs equal the same
requests run alone, cancellation by disconnect returning the KV and running
metrics to zero, every class of bad input answered by an OpenAI error object with
the right 4xx while the server keeps serving, the API key, and SIGTERM -> exit 0
(also with a stream in flight, which ends with finish_reason "abort").
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

SRC = os.environ["OKV_SOURCE_DIR"]
CLI = os.environ["OKV_CLI"]
MODEL = os.path.join(SRC, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
PID_FILE = os.environ.get("OKV_SERVER_PIDS")
CTX = 1024

import openai  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

HF_TOK = Tokenizer.from_file(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))

failures = []
servers = []


def check(cond, what):
    if cond:
        print(f"ok   {what}", flush=True)
    else:
        print(f"FAIL {what}", flush=True)
        failures.append(what)
    return cond


class Server:
    def __init__(self, *extra, model_args=("-m", MODEL), ctx_args=("--ctx", str(CTX))):
        self.log_path = f"/tmp/okv_test_server_{os.getpid()}_{len(servers)}.log"
        self.log = open(self.log_path, "w+")
        args = [CLI, "serve", *model_args, "--port", "0", "--threads", "2", *ctx_args,
                "--kv-pool-gb", "0.25", "--served-model-name", "smol", *extra]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        servers.append(self)
        if PID_FILE:
            with open(PID_FILE, "a") as f:
                f.write(f"{self.proc.pid}\n")
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early: {self.logs()}")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.logs())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.1)
        if self.port is None:
            raise RuntimeError(f"server did not start: {self.logs()}")

    def logs(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


def request(port, method, path, body=None, headers=None, raw=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    out = r.read()
    c.close()
    try:
        js = json.loads(out)
    except ValueError:
        js = None
    return r.status, js, out


def stream(port, path, body, headers=None, stop_after=None):
    """POST with stream; returns (status, events (parsed JSON), saw_done). With
    stop_after=k, closes the connection after k text events."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body=json.dumps(body).encode(), headers=h)
    r = c.getresponse()
    if r.status != 200:
        out = r.read()
        c.close()
        return r.status, [json.loads(out)], False
    events, done, n_text = [], False, 0
    buf = b""
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        payload = line[6:]
        if payload == b"[DONE]":
            done = True
            break
        ev = json.loads(payload)
        events.append(ev)
        if text_of(ev):
            n_text += 1
        if stop_after is not None and n_text >= stop_after:
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
            return r.status, events, False
    c.close()
    return r.status, events, done


def text_of(ev):
    if not ev.get("choices"):
        return ""
    ch = ev["choices"][0]
    if "text" in ch:
        return ch["text"] or ""
    return (ch.get("delta") or {}).get("content") or ""


def metrics(port):
    _, _, out = request(port, "GET", "/metrics")
    vals = {}
    for line in out.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        vals[name] = vals.get(name, 0.0) + float(value)
    return vals


def wait_idle(port, timeout=15):
    deadline = time.time() + timeout
    m = metrics(port)
    while time.time() < deadline:
        m = metrics(port)
        if m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0 \
                and m["vllm:kv_cache_usage_perc"] == 0:
            return True, m
        time.sleep(0.1)
    return False, m


def bench_json(port, *args, timeout=300):
    """Run `oasiskv bench serve` against the server with --json; (completed process, its JSON or {})."""
    jpath = f"/tmp/okv_test_bench_{os.getpid()}.json"
    r = subprocess.run([CLI, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", *args, "--json", jpath],
                       capture_output=True, text=True, timeout=timeout)
    try:
        res = json.load(open(jpath))
        os.unlink(jpath)
    except (OSError, ValueError):
        res = {}
    return r, res


def is_error_obj(js):
    e = js.get("error") if isinstance(js, dict) else None
    return isinstance(e, dict) and all(k in e for k in ("message", "type", "param", "code")) \
        and isinstance(e["message"], str) and e["message"]


def main():
    srv = Server("--max-num-seqs", "24")
    port = srv.port
    base = f"http://127.0.0.1:{port}/v1"

    # ---- health, models, metrics ----
    st, _, _ = request(port, "GET", "/health")
    check(st == 200, "GET /health is 200")
    st, js, _ = request(port, "GET", "/v1/models")
    m0 = js["data"][0] if st == 200 else {}
    check(st == 200 and js["object"] == "list" and m0.get("id") == "smol" and m0.get("object") == "model"
          and m0.get("owned_by") == "oasiskv" and m0.get("max_model_len") == CTX and "created" in m0 and "root" in m0,
          "GET /v1/models lists the served model")
    st, js, _ = request(port, "GET", "/v1/models/smol")
    st2, js2, _ = request(port, "GET", "/v1/models/other-model")
    check(st == 200 and js == m0 and st2 == 404 and is_error_obj(js2) and js2["error"]["code"] == "model_not_found",
          f"GET /v1/models/smol is the model, another name 404 model_not_found ({st}, {st2})")
    st, _, _ = request(port, "GET", "/ping")
    check(st == 200, "GET /ping (vLLM's liveness probe) is 200")
    mt = metrics(port)
    names = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count",
             "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_count",
             "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
             "vllm:spec_decode_num_accepted_tokens_total", "oasiskv:kv_device_bytes", "oasiskv:kv_host_bytes",
             "oasiskv:blocks_fetched_total", "oasiskv:fetch_bytes_total", "oasiskv:resident_in_time_ratio",
             "oasiskv:prediction_recall", "oasiskv:stall_seconds_total", "oasiskv:inline_selections_total",
             "oasiskv:engine_steps_total",
             "oasiskv:step_host_issue_seconds_total", "oasiskv:step_host_sparse_seconds_total",
             "oasiskv:step_host_blocked_seconds_total", "oasiskv:step_sync_wait_seconds_total",
             "oasiskv:steps_overlapped_total",
             "oasiskv:kv_residency_on_device"]
    missing = [n for n in names if n not in mt]
    check(not missing, f"GET /metrics exports the vLLM and oasiskv names (missing: {missing})")

    # ---- completions, not streamed: usage counts against the HF tokenizer ----
    prompt = "The capital of France is"
    n_prompt = len(HF_TOK.encode(prompt).ids)
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"model": "smol", "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                         "some_unknown_field": {"x": 1}})
    ok = st == 200 and js["object"] == "text_completion" and js["choices"][0]["finish_reason"] == "length"
    check(ok and js["usage"] == {"prompt_tokens": n_prompt, "completion_tokens": 8, "total_tokens": n_prompt + 8},
          f"completion: usage {js.get('usage') if js else None} (prompt {n_prompt} tokens by the HF tokenizer, 8 generated)")
    ref_text = js["choices"][0]["text"] if ok else None
    check(ok and len(HF_TOK.encode(ref_text).ids) in range(6, 11), "completion text re-tokenizes to about 8 tokens")
    ids = HF_TOK.encode(prompt).ids
    st, js2, _ = request(port, "POST", "/v1/completions",
                         {"prompt": ids, "max_tokens": 8, "temperature": 0, "ignore_eos": True})
    check(st == 200 and js2["choices"][0]["text"] == ref_text and js2["usage"]["prompt_tokens"] == len(ids),
          "completion from token ids equals the one from text")
    # the engine publishes a step's counters after the step, which may be just after its
    # tokens reached the client: wait for them a moment
    for _ in range(50):
        mt = metrics(port)
        if mt.get("oasiskv:engine_steps_total", 0) >= 16:
            break
        time.sleep(0.1)
    check(mt.get("oasiskv:engine_steps_total", 0) >= 16 and mt.get("oasiskv:step_host_issue_seconds_total", 0) > 0,
          f"GET /metrics counts the engine's steps and their host time ({mt.get('oasiskv:engine_steps_total')} steps)")

    # ---- completions streamed ----
    st, evs, done = stream(port, "/v1/completions",
                           {"model": "smol", "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                            "stream": True, "stream_options": {"include_usage": True}})
    text = "".join(text_of(e) for e in evs)
    usage = [e["usage"] for e in evs if e.get("usage")]
    fins = [e["choices"][0]["finish_reason"] for e in evs if e.get("choices") and e["choices"][0].get("finish_reason")]
    check(st == 200 and done and text == ref_text, "streamed completion equals the unstreamed one and ends with [DONE]")
    check(all(e["object"] == "text_completion" and e["id"] == evs[0]["id"] for e in evs), "stream chunks: object and id")
    check(fins == ["length"] and usage == [{"prompt_tokens": n_prompt, "completion_tokens": 8,
                                             "total_tokens": n_prompt + 8}] and evs[-1]["choices"] == [],
          "stream: one finish_reason, then a usage chunk with empty choices")
    # vLLM's stream_options.continuous_usage_stats: the usage so far in every chunk
    st, evs, done = stream(port, "/v1/completions",
                           {"model": "smol", "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                            "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    counts = [e["usage"]["completion_tokens"] if e.get("usage") else None for e in evs if text_of(e)]
    check(st == 200 and done and "".join(text_of(e) for e in evs) == ref_text and all(e.get("usage") for e in evs)
          and counts == sorted(counts) and counts[-1] == 8 and evs[-1]["usage"]["completion_tokens"] == 8
          and all(e["usage"]["prompt_tokens"] == n_prompt for e in evs),
          f"stream with continuous_usage_stats: usage in every chunk, counting up ({counts})")

    # ---- sampling extras: vLLM's penalties, logit_bias, min_p, min_tokens, stop_token_ids ----
    cat = {"prompt": "The cat sat on the mat. The cat", "max_tokens": 24, "temperature": 0, "ignore_eos": True}

    def comp(extra, port_=None):
        st, js, _ = request(port_ or port, "POST", "/v1/completions", {**cat, **extra})
        return st, js, (js["choices"][0]["text"] if st == 200 else None)

    st0, _, base_text = comp({})
    for name, val in (("repetition_penalty", 1.5), ("frequency_penalty", 2.0), ("presence_penalty", 2.0)):
        st, _, t = comp({name: val})
        check(st0 == 200 and st == 200 and t != base_text, f"{name} {val} changes the greedy text ({t[:40] if t else t!r})")
    st, _, t = comp({"repetition_penalty": 1.0, "frequency_penalty": 0, "presence_penalty": 0, "min_p": 0})
    check(st == 200 and t == base_text, "the penalties' defaults leave the greedy text as it was")
    a_id = HF_TOK.token_to_id("Ġapple") or HF_TOK.encode(" apple").ids[0]
    st, js, t = comp({"logit_bias": {str(a_id): 100}})
    check(st == 200 and t == HF_TOK.decode([a_id] * 24) and js["usage"]["completion_tokens"] == 24,
          f"logit_bias +100 on one id: every token is that id ({t[:30] if t else t!r})")
    first_id = HF_TOK.encode(base_text).ids[0]
    st, _, t = comp({"logit_bias": {str(first_id): -100}})
    check(st == 200 and not t.startswith(HF_TOK.decode([first_id])), "logit_bias -100 on the greedy first id: not drawn")
    # allowed_token_ids (vLLM's): sampled at temperature 1, every token is one of them
    allow = [a_id, HF_TOK.token_to_id("Ġcat"), HF_TOK.token_to_id("Ġsat")]
    st, js, t = comp({"allowed_token_ids": allow, "temperature": 1.0, "seed": 3})
    check(st == 200 and set(HF_TOK.encode(t).ids) <= set(allow) and js["usage"]["completion_tokens"] == 24,
          f"allowed_token_ids: every token drawn is one of them ({t[:40] if t else t!r})")
    st, js, t = comp({"allowed_token_ids": [first_id]})
    check(st == 200 and t == HF_TOK.decode([first_id] * 24), "allowed_token_ids of one id: every token is it")
    # bad_words (vLLM's): " cat" (and "cat" at a text's start) is never written; the greedy text had it
    cat_ids = {HF_TOK.token_to_id("Ġcat"), HF_TOK.token_to_id("cat")}
    st, js, t = comp({"bad_words": ["cat"]})
    check(st == 200 and " cat" in base_text and not (set(HF_TOK.encode(t).ids) & cat_ids) and t != base_text,
          f"bad_words ['cat']: not written ({t[:50] if t else t!r})")
    st, js, t = comp({"bad_words": ["  was happy"]})   # two tokens: " happy" is not drawn after " was"
    check(st == 200 and "was happy" in base_text and "was happy" not in t,
          f"bad_words ['was happy']: never written together ({t[:50] if t else t!r})")
    st, _, t = comp({"temperature": 1.0, "min_p": 1.0, "seed": 5})
    check(st == 200 and t == base_text, "min_p 1 at temperature 1 keeps only the most likely id: the greedy text")
    cat_id = HF_TOK.token_to_id("Ġcat")
    st, js, t = comp({"stop_token_ids": [cat_id], "ignore_eos": False})
    want = base_text[:base_text.index(" cat")] if " cat" in base_text else base_text
    check(st == 200 and t == want and js["choices"][0]["finish_reason"] == ("stop" if " cat" in base_text else "length"),
          f"stop_token_ids [' cat']: {t!r}, finish {js['choices'][0]['finish_reason'] if st == 200 else st}")
    st, js, t = comp({"stop_token_ids": [cat_id], "min_tokens": 20, "ignore_eos": False})
    check(st == 200 and js["usage"]["completion_tokens"] >= 20, f"min_tokens 20 holds the stop id back "
          f"({js['usage']['completion_tokens'] if st == 200 else st} tokens)")
    r = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0).completions.create(
        model="smol", prompt=cat["prompt"], max_tokens=24, temperature=0, frequency_penalty=2.0,
        extra_body={"ignore_eos": True})
    check(r.choices[0].text == comp({"frequency_penalty": 2.0})[2], "openai client: frequency_penalty as over HTTP")
    for extra, what in (({"presence_penalty": 3}, "presence_penalty 3"), ({"repetition_penalty": 0}, "repetition_penalty 0"),
                        ({"logit_bias": {"abc": 1}}, "a logit_bias key that is no id"),
                        ({"logit_bias": {str(a_id): 101}}, "a logit_bias of 101"), ({"min_p": 1.5}, "min_p 1.5"),
                        ({"stop_token_ids": [-1]}, "a negative stop token id"),
                        ({"min_tokens": 30}, "min_tokens past max_tokens"),
                        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
                         "response_format json_schema without a schema"),
                        ({"response_format": {"type": "json"}}, "response_format type json"),
                        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
                        ({"guided_grammar": "root ::= itm"}, "a grammar with an undefined rule"),
                        ({"guided_grammar": "start: \"a\" b"}, "a Lark grammar with an undefined rule"), ({"use_beam_search": True}, "beam search"),
                        ({"allowed_token_ids": []}, "an empty allowed_token_ids"),
                        ({"bad_words": [" "]}, "a blank bad word"), ({"bad_words": "cat"}, "bad_words not a list"),
                        ({"allowed_token_ids": [10 ** 7]}, "an allowed token id past the vocabulary"),
                        ({"structured_outputs": {"grammar": "expr ::= expr \"+\" \"1\" | \"1\"\nroot ::= expr"}},
                         "a left-recursive grammar"),
                        ({"guided_grammar": "root ::= \"a\"", "guided_regex": "a"}, "a grammar and a regex"),
                        ({"guided_regex": "(?=a)b"}, "a regex with a lookahead"), ({"guided_regex": ""}, "an empty regex"),
                        ({"structured_outputs": {"choice": ["a"], "json": {"type": "object"}}}, "two structured outputs"),
                        ({"structured_outputs": {"choice": ["a"]}, "guided_choice": ["b"]}, "structured_outputs and guided_choice"),
                        ({"suffix": "end"}, "a suffix")):
        st, js, _ = comp(extra)
        check(st == 400 and is_error_obj(js), f"{what} -> 400 ({js['error']['message'][:60] if st == 400 else st})")
    st, js, t = comp({"stop": ["."], "min_tokens": 10, "ignore_eos": False})
    check(st == 200 and js["usage"]["completion_tokens"] > 10 and js["choices"][0]["finish_reason"] == "stop"
          and not t.endswith("."), f"a stop string counts only past min_tokens 10 ({t!r})")
    st, js, _ = request(port, "POST", "/v1/completions",
                        raw=json.dumps(cat)[:-1].encode() + f', "logit_bias": {{"{a_id}": 100, "{a_id}": 0}}}}'.encode())
    check(st == 200 and js["choices"][0]["text"] == base_text, "logit_bias with a key given twice: the last value counts")
    st, js, _ = request(port, "POST", "/v1/completions", {"prompt": "Hi", "min_tokens": 20})
    check(st == 400 and is_error_obj(js), "min_tokens past the default max_tokens (16) -> 400")
    st, js, _ = request(port, "POST", "/v1/completions", {"prompt": "Hi", "stream_options": {"include_usage": True}})
    check(st == 400 and is_error_obj(js), "stream_options without stream -> 400")
    st, _, t = comp({"response_format": {"type": "text"}, "tools": [], "tool_choice": "none"})
    check(st == 200 and t == base_text, "response_format text, empty tools and tool_choice none are accepted")

    # ---- structured output: response_format json_object (JSON mode) ----
    # every answer parses as a JSON object (Python's json), greedy and sampled, chat and completions, streamed
    # too; the generation ends by itself once the object is complete (finish_reason stop, well before max_tokens)
    oc = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    asks = ["Give me a JSON object describing a cat with its name and age.",
            "List three fruits and their colours.", "What is the capital of France?"]
    n_ok = 0
    for i, ask in enumerate(asks):
        for temp in (0.0, 0.9):
            r = oc.chat.completions.create(model="smol", messages=[{"role": "user", "content": ask}], max_tokens=200,
                                           temperature=temp, seed=i, response_format={"type": "json_object"})
            txt = r.choices[0].message.content
            try:
                ok = isinstance(json.loads(txt), dict) and r.choices[0].finish_reason == "stop"
            except ValueError:
                ok = False
            n_ok += ok
            if not ok:
                print(f"  json mode: {ask!r} at {temp}: {txt!r} ({r.choices[0].finish_reason})")
    check(n_ok == 2 * len(asks), f"json_object: {n_ok} of {2 * len(asks)} chat answers are complete JSON objects")
    st, js, t = comp({"response_format": {"type": "json_object"}, "ignore_eos": False, "max_tokens": 120})
    try:
        ok = st == 200 and isinstance(json.loads(t), dict) and js["choices"][0]["finish_reason"] == "stop"
    except ValueError:
        ok = False
    check(ok, f"json_object on /v1/completions after a prose prompt: {t!r}")
    st, evs, done = stream(port, "/v1/chat/completions",
                           {"model": "smol", "messages": [{"role": "user", "content": asks[0]}], "max_tokens": 200,
                            "temperature": 0, "stream": True, "response_format": {"type": "json_object"}})
    streamed = "".join((e["choices"][0].get("delta") or {}).get("content") or "" for e in evs if e.get("choices"))
    r = oc.chat.completions.create(model="smol", messages=[{"role": "user", "content": asks[0]}], max_tokens=200,
                                   temperature=0, response_format={"type": "json_object"})
    check(st == 200 and done and streamed == r.choices[0].message.content, "json_object streamed = unstreamed")
    # a JSON schema (response_format json_schema through the openai client, and vLLM's guided_json): the answers
    # validate against it (jsonschema), with the enum's values and the required properties
    import jsonschema
    pet = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                            "kind": {"enum": ["cat", "dog", "fish"]}, "indoor": {"type": "boolean"},
                                            "toys": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                                            "owner": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
           "required": ["name", "age", "kind", "indoor"]}
    n_ok = 0
    for i, temp in enumerate((0.0, 0.7, 1.0)):
        r = oc.chat.completions.create(
            model="smol", messages=[{"role": "user", "content": "Describe a pet as JSON."}], max_tokens=300,
            temperature=temp, seed=i, response_format={"type": "json_schema", "json_schema": {"name": "pet", "schema": pet}})
        txt = r.choices[0].message.content
        try:
            jsonschema.validate(json.loads(txt), pet)
            n_ok += r.choices[0].finish_reason == "stop"
        except (ValueError, jsonschema.ValidationError) as ex:
            print(f"  json_schema at {temp}: {txt!r}: {str(ex)[:100]}")
    check(n_ok == 3, f"response_format json_schema: {n_ok} of 3 answers validate against the schema")
    st, js, t = comp({"guided_json": pet, "ignore_eos": False, "max_tokens": 300})
    try:
        jsonschema.validate(json.loads(t), pet)
        ok = js["choices"][0]["finish_reason"] == "stop"
    except (ValueError, jsonschema.ValidationError, TypeError):
        ok = False
    check(st == 200 and ok, f"guided_json (vLLM's) on /v1/completions: {t!r}")
    # vLLM's guided_choice: the answer is one of the strings, whole
    labels = ["positive", "negative", "neutral"]
    got = []
    for i, temp in enumerate((0.0, 1.0, 1.0)):
        st, js, _ = request(port, "POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Is 'I loved this film' positive or negative?"}], "max_tokens": 10,
            "temperature": temp, "seed": i, "guided_choice": labels})
        got.append((st, js["choices"][0]["message"]["content"] if st == 200 else None,
                    js["choices"][0]["finish_reason"] if st == 200 else None))
    check(all(s_ == 200 and c in labels and f == "stop" for s_, c, f in got), f"guided_choice: answers {got}")
    # the same through vLLM's newer structured_outputs, choice and json
    st, js, _ = request(port, "POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Is 'I loved this film' positive or negative?"}], "max_tokens": 10,
        "temperature": 1.0, "seed": 9, "structured_outputs": {"choice": labels}})
    check(st == 200 and js["choices"][0]["message"]["content"] in labels, f"structured_outputs.choice: "
          f"{js['choices'][0]['message']['content'] if st == 200 else js}")
    so_schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
                 "required": ["answer"], "additionalProperties": False}
    so_body = {"messages": [{"role": "user", "content": "Is water wet? Answer as JSON."}], "max_tokens": 60,
               "temperature": 0}
    st, js, _ = request(port, "POST", "/v1/chat/completions", dict(so_body, structured_outputs={"json": so_schema}))
    st2, js2, _ = request(port, "POST", "/v1/chat/completions", dict(so_body, guided_json=so_schema))
    txt = js["choices"][0]["message"]["content"] if st == 200 else None
    try:
        jsonschema.validate(json.loads(txt), so_schema)
        ok = st == 200 and js["choices"][0]["finish_reason"] == "stop"
    except (ValueError, jsonschema.ValidationError, TypeError):
        ok = False
    check(ok and st2 == 200 and js2["choices"][0]["message"]["content"] == txt,
          f"structured_outputs.json: {txt!r}, as guided_json gives it")
    def streamed_as_structured_outputs(body, kind):
        """body's guided_<kind> given as structured_outputs.<kind> instead, streamed: the answer's text (None: failed)"""
        b = {k: v for k, v in body.items() if k != "guided_" + kind}
        st, evs, _ = stream(port, "/v1/chat/completions", dict(b, structured_outputs={kind: body["guided_" + kind]},
                                                                 stream=True))
        return "".join(ev["choices"][0]["delta"].get("content") or "" for ev in evs if ev.get("choices")) \
            if st == 200 else None

    # vLLM's guided_regex (and structured_outputs.regex): the whole answer fully matches, sampled and streamed
    import re as re_mod
    for pat, extra in ((r"(yes|no), because [a-z ]{3,30}\.", {"temperature": 1.0, "seed": 4}),
                       (r"\d{4}-\d{2}-\d{2}", {"temperature": 0}),
                       (r"[À-ÿ]{2,5} ok", {"temperature": 1.0, "seed": 7})):
        body = {"messages": [{"role": "user", "content": "Is the sky blue? Answer and say why."}], "max_tokens": 60,
                "guided_regex": pat, **extra}
        st, js, _ = request(port, "POST", "/v1/chat/completions", body)
        txt = js["choices"][0]["message"]["content"] if st == 200 else None
        check(st == 200 and re_mod.fullmatch(pat, txt) is not None and js["choices"][0]["finish_reason"] == "stop",
              f"guided_regex {pat}: {txt!r} matches it")
        streamed = streamed_as_structured_outputs(body, "regex")
        check(streamed == txt, f"structured_outputs.regex streamed: {streamed!r} (as guided_regex: {txt!r})")
    # vLLM's guided_grammar (and structured_outputs.grammar), GBNF: the whole answer is a sentence of the grammar, as
    # Lark's Earley parser (a reference the project did not write) reads the same grammar, sampled and streamed
    from lark import Lark
    grammars = (
        ('root ::= expr " = " num\nexpr ::= term (("+" | "-" | "*") term){1,3}\nterm ::= num | "(" expr ")"\n'
         'num ::= [1-9] [0-9]{0,2}\n',
         'start: expr " = " num\nexpr: term (("+" | "-" | "*") term)~1..3\nterm: num | "(" expr ")"\nnum: /[1-9][0-9]{0,2}/\n',
         "Write a sum of small numbers and its value.", {"temperature": 1.0, "seed": 3}),
        ('root ::= "colour: " word ("," " "? word){0,3} "\\n" "sure: " ("yes" | "no")\nword ::= [a-z]{3,8}\n',
         'start: "colour: " word ("," " "? word)~0..3 "\\n" "sure: " ("yes" | "no")\nword: /[a-z]{3,8}/\n',
         "Name some colours.", {"temperature": 0}),
        ('root ::= "[" ws item ("," ws item)+ ws "]"\nitem ::= "\\"" [^"\\\\\\n]{1,12} "\\"" | "[" ws item ws "]"\n'
         'ws ::= " "?\n',
         'start: "[" ws item ("," ws item)+ ws "]"\nitem: "\\"" /[^"\\\\\\n]{1,12}/ "\\"" | "[" ws item ws "]"\n'
         'ws: " "?\n',
         "List three fruits as a JSON array.", {"temperature": 1.0, "seed": 11}))
    for gbnf, lark_text, ask, extra in grammars:
        parser = Lark(lark_text, parser="earley", lexer="dynamic")
        body = {"messages": [{"role": "user", "content": ask}], "max_tokens": 80, "guided_grammar": gbnf, **extra}
        st, js, _ = request(port, "POST", "/v1/chat/completions", body)
        txt = js["choices"][0]["message"]["content"] if st == 200 else None
        try:
            parser.parse(txt)
            parsed = True
        except Exception as ex:   # noqa: BLE001 (any parse error is the finding)
            parsed = f"{type(ex).__name__}"
        check(st == 200 and parsed is True and js["choices"][0]["finish_reason"] == "stop",
              f"guided_grammar {gbnf.splitlines()[0][:40]}...: {txt!r} is a sentence (Lark: {parsed}, "
              f"{js['choices'][0]['finish_reason'] if st == 200 else st})")
        streamed = streamed_as_structured_outputs(body, "grammar")
        check(streamed == txt, f"structured_outputs.grammar streamed: {streamed!r} (as guided_grammar: {txt!r})")
        # the same grammar in Lark's syntax: the same language, so the same masks and the same answer
        st, js, _ = request(port, "POST", "/v1/chat/completions", dict(body, guided_grammar=lark_text))
        check(st == 200 and js["choices"][0]["message"]["content"] == txt,
              f"the grammar in Lark's syntax gives the same answer: "
              f"{js['choices'][0]['message']['content'] if st == 200 else js}")
    # vLLM's documentation's example (Lark: ?rules, a /regex/ terminal)
    sql = ('?start: select_statement\n?select_statement: "SELECT " column_list " FROM " table_name\n'
           '?column_list: column_name ("," column_name)*\n?table_name: identifier\n?column_name: identifier\n'
           '?identifier: /[a-zA-Z_][a-zA-Z0-9_]*/\n')
    body = {"messages": [{"role": "user", "content": "Write a SQL query that lists the names of all users."}],
            "max_tokens": 60, "structured_outputs": {"grammar": sql}, "temperature": 0}
    st, js, _ = request(port, "POST", "/v1/chat/completions", body)
    txt = js["choices"][0]["message"]["content"] if st == 200 else None
    try:
        Lark(sql, parser="earley", lexer="dynamic").parse(txt)
        parsed = True
    except Exception as ex:   # noqa: BLE001
        parsed = f"{type(ex).__name__}"
    check(st == 200 and parsed is True, f"vLLM's SQL example grammar (Lark): {txt!r} is a sentence (Lark: {parsed}; "
          f"finish {js['choices'][0]['finish_reason'] if st == 200 else st}: a greedy SmolLM2 may write the name on)")
    # a grammar that nests without bound, the model pushed to open parentheses: near the grammar module's 64 levels the
    # tokens that would pass them are masked like any other that cannot continue, so the reply closes as a sentence
    paren = HF_TOK.token_to_id("(")
    st, js, t = comp({"guided_grammar": 'root ::= "(" root ")" | "x"', "max_tokens": 200, "logit_bias": {str(paren): 100}})
    depth = len(t) - len(t.lstrip("(")) if st == 200 else -1
    check(st == 200 and t == "(" * depth + "x" + ")" * depth and 20 <= depth <= 64 and
          js["choices"][0]["finish_reason"] == "stop", f"a grammar nested to its limits closes as a sentence "
          f"(depth {depth}: {t!r})")
    # requests that give the same regex share its compiled form, so the mask cache serves the second: a greedy answer
    # again walks (almost: two states may share a cache slot) none of the vocabulary
    body = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 30, "temperature": 0,
            "guided_regex": r"[A-Z][a-z]{2,9} is a colou?r( [a-z]{1,9}){2,6}\."}
    w0 = metrics(port).get("oasiskv:structured_walks_total", 0)
    st1, js1, _ = request(port, "POST", "/v1/chat/completions", body)
    w1 = metrics(port).get("oasiskv:structured_walks_total", 0)
    st2, js2, _ = request(port, "POST", "/v1/chat/completions", body)
    w2 = metrics(port).get("oasiskv:structured_walks_total", 0)
    check(st1 == st2 == 200 and js1["choices"][0]["message"]["content"] == js2["choices"][0]["message"]["content"] and
          w1 - w0 >= 6 and w2 - w1 <= (w1 - w0) // 3, f"the same regex twice: {w1 - w0} walks, then {w2 - w1}")
    for bad, what in (({"guided_choice": []}, "an empty guided_choice"), ({"guided_choice": ["a", 3]}, "a non-string choice"),
                      ({"guided_choice": ["a"], "response_format": {"type": "json_object"}}, "guided_choice with JSON mode")):
        st, js, _ = comp(bad)
        check(st == 400 and is_error_obj(js), f"{what} -> 400 ({js['error']['message'][:60] if st == 400 else st})")
    for bad, what in (({"type": "string", "pattern": "(?<=a)b"}, "lookbehind"), ({"type": "integer", "minimum": 0}, "minimum")):
        st, js, _ = comp({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": bad}}})
        check(st == 400 and what in js["error"]["message"], f"a schema with {what} -> 400 naming it "
              f"({js['error']['message'][:80] if st == 400 else st})")
    st, js, t = comp({"response_format": {"type": "json_object"}, "ignore_eos": False, "max_tokens": 3})
    check(st == 200 and js["choices"][0]["finish_reason"] == "length" and t.lstrip().startswith("{"),
          f"json_object cut by max_tokens: finish_reason length, a JSON prefix ({t!r})")

    # ---- vLLM's /tokenize, /detokenize, /version ----
    text = "Tokenize me: naïve café, 42 apples."
    st, js, _ = request(port, "POST", "/tokenize", {"prompt": text})
    check(st == 200 and js["tokens"] == HF_TOK.encode(text).ids and js["count"] == len(js["tokens"])
          and js["max_model_len"] == CTX, f"/tokenize = the Hugging Face tokenizer's ids ({js.get('count') if js else st})")
    st2, js2, _ = request(port, "POST", "/detokenize", {"tokens": js["tokens"] if st == 200 else []})
    check(st2 == 200 and js2["prompt"] == text, "/detokenize gives the text back")
    st, js, _ = request(port, "POST", "/tokenize", {"prompt": text, "return_token_strs": True})
    check(st == 200 and js.get("token_strs") == HF_TOK.encode(text).tokens,
          f"/tokenize return_token_strs = the Hugging Face tokenizer's tokens ({js.get('token_strs', [])[:4]}...)")
    chat_body = {"messages": [{"role": "user", "content": "Name a color."}]}
    st, js, _ = request(port, "POST", "/tokenize", chat_body)
    st2, js2, _ = request(port, "POST", "/v1/chat/completions", {**chat_body, "max_tokens": 1})
    check(st == 200 and st2 == 200 and js["count"] == js2["usage"]["prompt_tokens"],
          "/tokenize of messages counts the chat request's prompt tokens")
    for path, body, what in (("/tokenize", {"prompt": 5}, "a prompt that is no string"),
                             ("/tokenize", {"prompt": "x", "model": "nope"}, "an unknown model"),
                             ("/detokenize", {"tokens": [10 ** 9]}, "an id past the vocabulary"),
                             ("/detokenize", {"tokens": "abc"}, "tokens that are no array")):
        st, js, _ = request(port, "POST", path, body)
        check(st in (400, 404) and is_error_obj(js), f"{path} with {what} -> {st}")
    st, js, _ = request(port, "GET", "/version")
    check(st == 200 and isinstance(js.get("version"), str) and js["version"], f"/version: {js}")

    # ---- stop strings ----
    words = ref_text.split()
    if len(words) >= 2:
        stop_word = words[1]
        st, js, _ = request(port, "POST", "/v1/completions",
                            {"prompt": prompt, "max_tokens": 8, "temperature": 0, "stop": [stop_word, "zzzz"]})
        cut = ref_text[:ref_text.index(stop_word)]
        check(st == 200 and js["choices"][0]["text"] == cut and js["choices"][0]["finish_reason"] == "stop",
              f"stop string {stop_word!r} cuts the text before it")

    # ---- chat, raw and through the openai client ----
    msgs = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a color."}]
    st, js, _ = request(port, "POST", "/v1/chat/completions",
                        {"model": "smol", "messages": msgs, "max_completion_tokens": 6, "temperature": 0,
                         "ignore_eos": True})
    ok = st == 200 and js["object"] == "chat.completion" and js["choices"][0]["message"]["role"] == "assistant"
    check(ok and js["usage"]["completion_tokens"] == 6 and js["choices"][0]["finish_reason"] == "length",
          "chat completion with max_completion_tokens")
    chat_text = js["choices"][0]["message"]["content"] if ok else None
    parts = [{"role": "system", "content": [{"type": "text", "text": "You are brief."}]},
             {"role": "user", "content": [{"type": "text", "text": "Name a color."}]}]
    st, js, _ = request(port, "POST", "/v1/chat/completions",
                        {"messages": parts, "max_tokens": 6, "temperature": 0, "ignore_eos": True})
    check(st == 200 and js["choices"][0]["message"]["content"] == chat_text, "chat content as text parts")

    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=60)
    r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=6, temperature=0,
                                       extra_body={"ignore_eos": True})
    check(r.choices[0].message.content == chat_text and r.usage.completion_tokens == 6,
          "openai client: chat.completions.create")
    chunks = list(client.chat.completions.create(model="smol", messages=msgs, max_tokens=6, temperature=0, stream=True,
                                                 stream_options={"include_usage": True},
                                                 extra_body={"ignore_eos": True}))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(streamed == chat_text and chunks[0].choices[0].delta.role == "assistant"
          and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6,
          "openai client: streamed chat (role first, usage last)")
    r = client.completions.create(model="smol", prompt=prompt, max_tokens=8, temperature=0,
                                  extra_body={"ignore_eos": True})
    check(r.choices[0].text == ref_text and r.usage.prompt_tokens == n_prompt, "openai client: completions.create")
    ms = client.models.list()
    check([m.id for m in ms.data] == ["smol"], "openai client: models.list")
    check(client.models.retrieve("smol").id == "smol", "openai client: models.retrieve")
    try:
        client.completions.create(model="nope", prompt="x", max_tokens=1)
        check(False, "openai client: unknown model raises NotFoundError")
    except openai.NotFoundError:
        check(True, "openai client: unknown model raises NotFoundError")
    r1 = client.completions.create(model="smol", prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=7,
                                   extra_body={"ignore_eos": True})
    r2 = client.completions.create(model="smol", prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=7,
                                   extra_body={"ignore_eos": True})
    check(r1.choices[0].text == r2.choices[0].text, "seeded sampling repeats")

    # ---- several choices: a list of prompts (as lm-evaluation-harness batches them), n > 1 ----
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": [prompt, ids, "Once upon a time"], "max_tokens": 8, "temperature": 0,
                         "ignore_eos": True})
    chs = js["choices"] if st == 200 else []
    n_once = len(HF_TOK.encode("Once upon a time").ids)
    check(st == 200 and [c["index"] for c in chs] == [0, 1, 2] and chs[0]["text"] == ref_text
          and chs[1]["text"] == ref_text and js["usage"]["prompt_tokens"] == 2 * n_prompt + n_once
          and js["usage"]["completion_tokens"] == 24,
          "a list of 3 prompts (text, ids, text): 3 choices in order, each equal to its request alone; usage summed")
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.9, "seed": 11, "n": 3,
                         "ignore_eos": True})
    texts = [c["text"] for c in js["choices"]] if st == 200 else []
    check(st == 200 and len(texts) == 3 and len(set(texts)) > 1 and js["usage"]["prompt_tokens"] == n_once
          and js["usage"]["completion_tokens"] == 24,
          "n = 3 with sampling: 3 different choices, the prompt counted once")
    # best_of > n: the same candidates as n = best_of (same seed), the n of the largest summed log-probability
    # returned in that order (vLLM's ranking), every candidate's tokens in the usage (OpenAI bills them)
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.9, "seed": 11, "n": 3,
                         "logprobs": 0, "ignore_eos": True})
    cands = sorted(((sum(c["logprobs"]["token_logprobs"]), c["text"]) for c in js["choices"]), reverse=True) \
        if st == 200 else []
    check(st == 200 and [t for _, t in sorted(cands, key=lambda x: texts.index(x[1]))] == texts,
          "n = 3 with logprobs: the same choices as without")
    for n_, lp_ in ((1, None), (2, 1)):
        body = {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.9, "seed": 11, "n": n_, "best_of": 3,
                "ignore_eos": True}
        if lp_ is not None:
            body["logprobs"] = lp_
        st, js, _ = request(port, "POST", "/v1/completions", body)
        chs = js["choices"] if st == 200 else []
        check(st == 200 and [c["text"] for c in chs] == [t for _, t in cands[:n_]]
              and [c["index"] for c in chs] == list(range(n_)) and js["usage"]["completion_tokens"] == 24
              and all((c["logprobs"] is None) == (lp_ is None) for c in chs)
              and (lp_ is None or all(abs(sum(c["logprobs"]["token_logprobs"]) - s_) < 1e-4
                                      for c, (s_, _) in zip(chs, cands))),
              f"best_of = 3, n = {n_}{' with logprobs' if lp_ else ''}: the {n_} most likely of the 3 candidates, "
              "in order; usage counts all 24 tokens")
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": [prompt, "Once upon a time"], "max_tokens": 8, "temperature": 0, "best_of": 2,
                         "ignore_eos": True})
    st1, js1, _ = request(port, "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8,
                                                             "temperature": 0, "ignore_eos": True})
    check(st == 200 and st1 == 200 and [c["text"] for c in js["choices"]] == [ref_text, js1["choices"][0]["text"]]
          and [c["index"] for c in js["choices"]] == [0, 1] and js["usage"]["completion_tokens"] == 32,
          "2 prompts with best_of = 2 (greedy): one choice per prompt, indices 0 and 1")
    st, js, _ = request(port, "POST", "/v1/chat/completions",
                        {"messages": msgs, "max_tokens": 6, "temperature": 0, "n": 2, "ignore_eos": True})
    check(st == 200 and [c["message"]["content"] for c in js["choices"]] == [chat_text, chat_text],
          "chat with n = 2 (greedy): two equal choices")
    # streamed: the choices' chunks interleave, each with its index; each choice's text and finish equal the
    # unstreamed request's (same seed), the usage chunk sums them
    def by_index(evs, key="text"):
        out = {}
        for e in evs:
            for c in e.get("choices") or []:
                piece = c.get("text") if key == "text" else (c.get("delta") or {}).get("content")
                d = out.setdefault(c["index"], {"text": "", "finish": [], "role": 0})
                d["text"] += piece or ""
                d["role"] += (c.get("delta") or {}).get("role") == "assistant"
                if c.get("finish_reason"):
                    d["finish"].append(c["finish_reason"])
        return out
    body = {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.9, "seed": 11, "n": 3, "ignore_eos": True}
    st, evs, done = stream(port, "/v1/completions", dict(body, stream=True, stream_options={"include_usage": True}))
    got = by_index(evs)
    check(st == 200 and done and sorted(got) == [0, 1, 2] and [got[i]["text"] for i in range(3)] == texts
          and all(got[i]["finish"] == ["length"] for i in range(3)) and all(len(e["choices"]) == 1 for e in evs[:-1])
          and evs[-1]["choices"] == [] and evs[-1]["usage"] == {"prompt_tokens": n_once, "completion_tokens": 24,
                                                               "total_tokens": n_once + 24},
          "n = 3 streamed: three indexed choices equal to the unstreamed ones, one finish each, usage summed")
    st, evs, done = stream(port, "/v1/completions",
                           {"prompt": [prompt, "Once upon a time"], "max_tokens": 8, "temperature": 0, "n": 2,
                            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    got = by_index(evs)
    st1, js1, _ = request(port, "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8,
                                                             "temperature": 0, "ignore_eos": True})
    once_text = js1["choices"][0]["text"] if st1 == 200 else None
    check(st == 200 and done and [got.get(i, {}).get("text") for i in range(4)] == [ref_text, ref_text, once_text, once_text]
          and evs[-1]["usage"]["prompt_tokens"] == n_prompt + n_once and evs[-1]["usage"]["completion_tokens"] == 32,
          "2 prompts x n = 2 streamed: choices 0-1 of the first prompt, 2-3 of the second, each equal to its request alone")
    st, evs, done = stream(port, "/v1/chat/completions",
                           {"messages": msgs, "max_tokens": 6, "temperature": 0, "n": 2, "ignore_eos": True,
                            "stream": True})
    got = by_index(evs, "delta")
    check(st == 200 and done and sorted(got) == [0, 1] and all(got[i]["text"] == chat_text and got[i]["role"] == 1
                                                              and got[i]["finish"] == ["length"] for i in range(2)),
          "chat with n = 2 streamed: a role chunk per choice, then each choice's text, equal to the unstreamed")
    chunks = list(client.chat.completions.create(model="smol", messages=msgs, max_tokens=6, temperature=0, n=2,
                                                 stream=True, extra_body={"ignore_eos": True}))
    parts = {0: "", 1: ""}
    for ch in chunks:
        for c in ch.choices:
            parts[c.index] += c.delta.content or ""
    check(parts == {0: chat_text, 1: chat_text}, "openai client: chat with n = 2 streamed, each choice's text")

    # ---- log-probabilities: completions (logprobs, echo), chat (logprobs, top_logprobs) ----
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True, "logprobs": 3})
    lp = js["choices"][0]["logprobs"] if st == 200 else None
    ok = st == 200 and js["choices"][0]["text"] == ref_text and lp is not None
    check(ok and len(lp["tokens"]) == 8 and len(lp["token_logprobs"]) == 8 and len(lp["top_logprobs"]) == 8
          and len(lp["text_offset"]) == 8 and "".join(lp["tokens"]) == ref_text,
          "completion logprobs: one entry per generated token; the tokens spell the text")
    greedy = ok and all(v <= 0 and 1 <= len(d) <= 4 and max(d.values()) == v and d[t] == v
                        for t, v, d in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]))
    check(greedy, "completion logprobs: greedy tokens are their top alternatives (<= 3 + the chosen one)")
    check(ok and lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0,
          "completion logprobs: text offsets rise from 0")
    gen_lp = lp["token_logprobs"] if ok else []
    # echo with logprobs and max_tokens 1 (what lm-evaluation-harness sends for loglikelihood):
    # the prompt + the 8 tokens above as ids; their prompt entries equal their logprobs above
    ids_full = HF_TOK.encode(prompt).ids + HF_TOK.encode(ref_text).ids if ok else []
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": ids_full, "max_tokens": 1, "temperature": 0, "logprobs": 1, "echo": True})
    ok2 = st == 200 and ok
    lp2 = js["choices"][0]["logprobs"] if ok2 else {}
    n_full = len(ids_full)
    check(ok2 and len(lp2["tokens"]) == n_full + 1 and lp2["token_logprobs"][0] is None and lp2["top_logprobs"][0] is None
          and js["choices"][0]["text"].startswith(prompt + ref_text),
          f"echo: the prompt's {n_full} tokens (the first without a log-probability), then the generated one")
    same = ok2 and len(lp2["tokens"]) == n_full + 1 and all(
        abs(a - b) <= 2e-3 for a, b in zip(lp2["token_logprobs"][n_full - 8:n_full], gen_lp))
    check(same and HF_TOK.encode(prompt).ids == ids_full[:n_prompt],
          "echo: the prompt entries of the resubmitted tokens equal their logprobs when generated")
    # vLLM's prompt_logprobs: the echo entries again, as {id: {logprob, rank, decoded_token}} with the 20 most likely;
    # an entry's rank agrees with the alternatives (within the 20: its place among them; past them: below the 20th)
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": ids_full, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 20})
    plp = js["choices"][0].get("prompt_logprobs") if st == 200 else None
    good = ok2 and plp is not None and len(plp) == n_full and plp[0] is None and js["choices"][0]["logprobs"] is None
    for i in range(1, n_full if good else 0):
        d, tid = plp[i], ids_full[i]
        own = d.get(str(tid))
        tops = sorted((v for k, v in d.items() if int(k) != tid or v["rank"] <= 20), key=lambda v: v["rank"])
        good &= own is not None and abs(own["logprob"] - lp2["token_logprobs"][i]) <= 1e-5
        good &= [v["rank"] for v in tops] == list(range(1, 21)) and all(
            a["logprob"] >= b["logprob"] for a, b in zip(tops, tops[1:]))
        if own is not None and own["rank"] <= 20:
            good &= len(d) == 20 and tops[own["rank"] - 1]["logprob"] == own["logprob"]
        elif own is not None:
            good &= len(d) == 21 and own["logprob"] <= tops[-1]["logprob"]
        dec = HF_TOK.decode([tid])
        good &= own is not None and ("\ufffd" in dec or own["decoded_token"] == dec)
    check(good, f"prompt_logprobs 20: the {n_full} prompt tokens' entries equal echo's, with ranks that agree with "
          f"the 20 alternatives, and their text")
    st, js, _ = request(port, "POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 2, "prompt_logprobs": 0})
    plc = js.get("prompt_logprobs") if st == 200 else None
    check(plc is not None and plc[0] is None and js["usage"]["prompt_tokens"] == len(plc) and
          all(len(d) == 1 and list(d.values())[0]["rank"] >= 1 for d in plc[1:]),
          "chat: prompt_logprobs 0 on the response, one entry a prompt token (its own)")
    # return_tokens_as_token_ids: the entries' tokens as "token_id:N", the offsets as before
    st, js, _ = request(port, "POST", "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0,
                                                           "ignore_eos": True, "logprobs": 3,
                                                           "return_tokens_as_token_ids": True})
    lpi = js["choices"][0]["logprobs"] if st == 200 else {}
    check(st == 200 and ok and js["choices"][0]["text"] == ref_text and lpi["text_offset"] == lp["text_offset"] and
          [HF_TOK.decode([int(t.split(":")[1])]) for t in lpi["tokens"]] == lp["tokens"] and
          all(k.startswith("token_id:") for d in lpi["top_logprobs"] for k in d),
          f"return_tokens_as_token_ids: {lpi.get('tokens', [])[:3]}...")
    # include_stop_str_in_output: the stop string stays at the end (streamed too); truncate_prompt_tokens keeps the
    # prompt's last tokens; skip_special_tokens false with include_stop_str_in_output: the end-of-turn token's text
    if ok and len(ref_text) > 8:
        stop_s = ref_text[4:7]
        cut_at = ref_text.index(stop_s)
        for inc in (False, True):
            body = {"prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True, "stop": [stop_s],
                    "include_stop_str_in_output": inc}
            st, js, _ = request(port, "POST", "/v1/completions", body)
            want = ref_text[:cut_at + (len(stop_s) if inc else 0)]
            _, evs, _ = stream(port, "/v1/completions", dict(body, stream=True))
            streamed = "".join(e["choices"][0]["text"] for e in evs if e.get("choices"))
            check(st == 200 and js["choices"][0]["text"] == want and js["choices"][0]["finish_reason"] == "stop" and
                  streamed == want, f"stop {stop_s!r}, include_stop_str_in_output {inc}: {js['choices'][0]['text']!r} "
                  f"(streamed {streamed!r})")
    st, js, _ = request(port, "POST", "/v1/completions", {"prompt": ids_full, "max_tokens": 1, "temperature": 0,
                                                           "echo": True, "truncate_prompt_tokens": 5})
    check(st == 200 and js["usage"]["prompt_tokens"] == 5 and
          js["choices"][0]["text"].startswith(HF_TOK.decode(ids_full[-5:], skip_special_tokens=False)),
          f"truncate_prompt_tokens 5: the last 5 tokens ({js['choices'][0]['text'] if st == 200 else js!r})")
    two = [{"role": "user", "content": "What is 2+2? Answer with a number only."}]
    got = {}
    for skip in (True, False):
        for inc in (False, True):
            st, js, _ = request(port, "POST", "/v1/chat/completions",
                                {"messages": two, "max_tokens": 40, "temperature": 0, "skip_special_tokens": skip,
                                 "include_stop_str_in_output": inc})
            got[skip, inc] = (js["choices"][0]["message"]["content"], js["choices"][0]["finish_reason"]) if st == 200 \
                else (None, None)
    base, fin = got[True, False]
    check(fin == "stop" and got[True, True] == got[False, False] == (base, "stop") and
          got[False, True] == (base + "<|im_end|>", "stop"),
          f"skip_special_tokens false with include_stop_str_in_output: the end-of-turn token's text ends the reply "
          f"({got[False, True][0]!r}; otherwise {base!r})")
    # max_tokens 0 with echo (the legacy API's way to score a prompt alone): the prompt's entries only
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": ids_full, "max_tokens": 0, "temperature": 0, "logprobs": True, "echo": True})
    lp0 = js["choices"][0]["logprobs"] if st == 200 else {}
    check(st == 200 and len(lp0.get("tokens", [])) == n_full and js["usage"]["completion_tokens"] == 0
          and lp0["token_logprobs"][1:] == lp2["token_logprobs"][1:n_full] and all(len(d) <= 2 for d in lp0["top_logprobs"][1:])
          and js["choices"][0]["text"] == HF_TOK.decode(ids_full, skip_special_tokens=False),
          "echo with max_tokens 0 (and logprobs: true = 1): the prompt's entries alone")
    # an end-of-generation token gets its entry too (scoring sums the continuation's entries up to the last)
    eos_prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello! How can I help you today?"
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": eos_prompt, "max_tokens": 1, "temperature": 0, "logprobs": 1, "echo": True})
    n_eos = len(HF_TOK.encode(eos_prompt).ids)
    lpe = js["choices"][0]["logprobs"] if st == 200 else {}
    check(st == 200 and js["choices"][0]["finish_reason"] == "stop" and js["usage"]["completion_tokens"] == 0
          and len(lpe["tokens"]) == n_eos + 1 and lpe["tokens"][-1] == "<|im_end|>" and lpe["token_logprobs"][-1] < 0,
          "echo: an end-of-generation token (finish_reason stop) has its entry after the prompt's")
    # a prompt of token ids that cuts a character: the echoed text is valid UTF-8 (U+FFFD for the cut)
    cut = HF_TOK.encode("Emoji \U0001F600 time").ids[:3]
    st, _, raw = request(port, "POST", "/v1/completions",
                         {"prompt": cut, "max_tokens": 1, "temperature": 0, "echo": True, "ignore_eos": True})
    try:
        txt = json.loads(raw.decode("utf-8"))["choices"][0]["text"]
    except Exception:  # noqa: BLE001
        txt = None
    check(st == 200 and txt is not None and txt.startswith("Emoji ") and "\ufffd" in txt,
          f"echo of ids that cut a character: valid UTF-8 with U+FFFD ({txt!r})")
    chat_lp = {"messages": msgs, "max_tokens": 6, "temperature": 0, "ignore_eos": True, "logprobs": True,
               "top_logprobs": 2}
    st, js, _ = request(port, "POST", "/v1/chat/completions", chat_lp)
    content = js["choices"][0]["logprobs"]["content"] if st == 200 else []
    check(st == 200 and js["choices"][0]["message"]["content"] == chat_text and len(content) == 6
          and "".join(c["token"] for c in content) == chat_text
          and all(len(c["top_logprobs"]) == 2 and c["top_logprobs"][0]["logprob"] == c["logprob"]
                  and bytes(c["bytes"]).decode("utf-8", "replace") == c["token"] for c in content),
          "chat logprobs: token, logprob, bytes and 2 top alternatives per generated token")
    st, evs, done = stream(port, "/v1/chat/completions", dict(chat_lp, stream=True))
    s_content = [c for e in evs if e.get("choices") and e["choices"][0].get("logprobs")
                 for c in e["choices"][0]["logprobs"]["content"]]
    check(st == 200 and done and [c["token"] for c in s_content] == [c["token"] for c in content]
          and all(abs(a["logprob"] - b["logprob"]) < 1e-6 for a, b in zip(s_content, content)),
          "streamed chat logprobs equal the unstreamed ones")
    st, evs, done = stream(port, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0,
                                                      "ignore_eos": True, "logprobs": 3, "stream": True})
    s_lp = [e["choices"][0]["logprobs"] for e in evs if e.get("choices") and e["choices"][0].get("logprobs")]
    check(st == 200 and done and sum((x["tokens"] for x in s_lp), []) == (lp["tokens"] if ok else None)
          and sum((x["text_offset"] for x in s_lp), []) == (lp["text_offset"] if ok else None),
          "streamed completion logprobs equal the unstreamed ones (offsets included)")
    r = client.completions.create(model="smol", prompt=prompt, max_tokens=4, temperature=0, logprobs=2,
                                  extra_body={"ignore_eos": True})
    check(len(r.choices[0].logprobs.tokens) == 4 and len(r.choices[0].logprobs.top_logprobs[0]) >= 2,
          "openai client: completions with logprobs")
    r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=4, temperature=0, logprobs=True,
                                       top_logprobs=3, extra_body={"ignore_eos": True})
    check(len(r.choices[0].logprobs.content) == 4 and len(r.choices[0].logprobs.content[0].top_logprobs) == 3,
          "openai client: chat with logprobs and top_logprobs")

    # ---- 64 concurrent streams equal to the same requests alone ----
    subjects = ["The sea", "My cat", "A tall tree", "The city at night", "Old books", "Winter", "A small robot",
                "The river", "Coffee", "Mountains", "The moon", "A good friend", "Rain", "The library",
                "Music", "A long road"]
    reqs = []
    for i in range(64):
        s = subjects[i % len(subjects)]
        reqs.append({"prompt": f"{s} is", "max_tokens": 6 + (i % 3), "temperature": 0, "ignore_eos": True,
                     "stream": True, "stream_options": {"include_usage": True}})
    alone = {}
    t0 = time.time()
    for i, rq in enumerate(reqs):
        key = (rq["prompt"], rq["max_tokens"])
        if key not in alone:
            st, evs, done = stream(port, "/v1/completions", rq)
            alone[key] = "".join(text_of(e) for e in evs) if st == 200 and done else None
    t_alone = time.time() - t0
    results = [None] * 64

    def worker(i):
        try:
            st, evs, done = stream(port, "/v1/completions", reqs[i])
            u = [e["usage"] for e in evs if e.get("usage")]
            results[i] = ("".join(text_of(e) for e in evs), done and st == 200,
                          u[0]["completion_tokens"] if u else None)
        except Exception as ex:  # noqa: BLE001
            results[i] = (repr(ex), False, None)

    t0 = time.time()
    th = [threading.Thread(target=worker, args=(i,)) for i in range(64)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    t_conc = time.time() - t0
    lost = [i for i in range(64) if not results[i] or not results[i][1]]
    check(not lost, f"64 concurrent streams: none lost ({len(lost)} lost) [{t_conc:.1f}s; {len(alone)} alone runs {t_alone:.1f}s]")
    diff = [i for i in range(64) if results[i] and results[i][0] != alone[(reqs[i]["prompt"], reqs[i]["max_tokens"])]]
    check(not diff, f"64 concurrent streams equal the requests run alone (differ: {diff[:5]})")
    check(all(results[i] and results[i][2] == reqs[i]["max_tokens"] for i in range(64)),
          "64 concurrent streams: completion_tokens == max_tokens")
    idle, m = wait_idle(port)
    check(idle, "after the burst: nothing running or waiting, KV usage 0")
    n_ovl, n_steps = m.get("oasiskv:steps_overlapped_total", 0), m.get("oasiskv:engine_steps_total", 0)
    check(0 < n_ovl < n_steps, f"overlapped decoding (the default): {n_ovl:.0f} of {n_steps:.0f} steps queued "
                               "behind the step before")

    # ---- cancellation by disconnect ----
    seen = {}

    def watch():
        for _ in range(100):
            mm = metrics(port)
            if mm["vllm:num_requests_running"] >= 1 and mm["vllm:kv_cache_usage_perc"] > 0:
                seen["busy"] = True
                return
            time.sleep(0.05)

    w = threading.Thread(target=watch)
    w.start()
    st, evs, _ = stream(port, "/v1/completions", {"prompt": "Tell me a long story.", "max_tokens": 900,
                                                  "temperature": 0, "ignore_eos": True, "stream": True},
                        stop_after=20)
    w.join()
    check(st == 200 and seen.get("busy"), "a long stream shows running 1 and KV usage > 0")
    idle, m = wait_idle(port)
    check(idle, f"client disconnect mid-stream: running {m['vllm:num_requests_running']}, "
                f"KV usage {m['vllm:kv_cache_usage_perc']} back to 0")
    ab = m.get("vllm:request_success_total", 0)
    # a non-streamed request whose client goes away
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Count to one thousand:", "max_tokens": 900,
                                                          "ignore_eos": True}),
              headers={"Content-Type": "application/json"})
    time.sleep(1.0)
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    idle, m = wait_idle(port)
    check(idle, "client disconnect during a non-streamed request: KV and running back to 0")
    st, evs, _ = stream(port, "/v1/completions", {"prompt": "Tell me a long story.", "max_tokens": 900, "n": 3,
                                                  "temperature": 0.8, "ignore_eos": True, "stream": True},
                        stop_after=30)
    idle, m = wait_idle(port)
    check(st == 200 and len({c["index"] for e in evs for c in e["choices"]}) == 3 and idle,
          "client disconnect mid-stream of n = 3: all three choices cancelled, KV and running back to 0")

    # ---- bad input: OpenAI error objects, right status, the server keeps serving ----
    big_prompt = "hello " * (CTX + 100)
    cases = [
        ("malformed JSON", "/v1/completions", None, b'{"prompt": "x", ', 400),
        ("body not an object", "/v1/completions", [1, 2], None, 400),
        ("empty body", "/v1/completions", None, b"", 400),
        ("missing prompt", "/v1/completions", {"max_tokens": 4}, None, 400),
        ("missing messages", "/v1/chat/completions", {"max_tokens": 4}, None, 400),
        ("prompt of wrong type", "/v1/completions", {"prompt": 5}, None, 400),
        ("prompt token out of vocabulary", "/v1/completions", {"prompt": [1, 99999999]}, None, 400),
        ("messages of wrong type", "/v1/chat/completions", {"messages": "hi"}, None, 400),
        ("message without role", "/v1/chat/completions", {"messages": [{"content": "hi"}]}, None, 400),
        ("message with a bad role", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, None, 400),
        ("image content part", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, None, 400),
        ("max_tokens of wrong type", "/v1/completions", {"prompt": "x", "max_tokens": "4"}, None, 400),
        ("max_tokens 0", "/v1/completions", {"prompt": "x", "max_tokens": 0}, None, 400),
        ("max_tokens negative", "/v1/completions", {"prompt": "x", "max_tokens": -5}, None, 400),
        ("max_tokens fractional", "/v1/completions", {"prompt": "x", "max_tokens": 2.5}, None, 400),
        ("max_tokens too large", "/v1/completions", {"prompt": "x", "max_tokens": 10 ** 9}, None, 400),
        ("max_tokens past the context", "/v1/completions", {"prompt": "x", "max_tokens": CTX}, None, 400),
        ("prompt longer than the context", "/v1/completions", {"prompt": big_prompt, "max_tokens": 1}, None, 400),
        ("chat longer than the context", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": big_prompt}]}, None, 400),
        ("temperature of wrong type", "/v1/completions", {"prompt": "x", "temperature": "hot"}, None, 400),
        ("negative temperature", "/v1/completions", {"prompt": "x", "temperature": -1}, None, 400),
        ("top_p out of range", "/v1/completions", {"prompt": "x", "top_p": 1.5}, None, 400),
        ("stop of wrong type", "/v1/completions", {"prompt": "x", "stop": 3}, None, 400),
        ("stream of wrong type", "/v1/completions", {"prompt": "x", "stream": "yes"}, None, 400),
        ("n past 64", "/v1/completions", {"prompt": "x", "n": 65}, None, 400),
        ("best_of below n", "/v1/completions", {"prompt": "x", "n": 3, "best_of": 2}, None, 400),
        ("best_of past 64", "/v1/completions", {"prompt": "x", "best_of": 65}, None, 400),
        ("best_of > n streamed", "/v1/completions", {"prompt": "x", "best_of": 2, "stream": True}, None, 400),
        ("33 prompts x best_of 2", "/v1/completions", {"prompt": ["a"] * 33, "best_of": 2}, None, 400),
        ("65 prompts", "/v1/completions", {"prompt": ["a"] * 65}, None, 400),
        ("a list of prompts with a number", "/v1/completions", {"prompt": ["a", 3]}, None, 400),
        ("logprobs past 20", "/v1/completions", {"prompt": "x", "logprobs": 21}, None, 400),
        ("logprobs of wrong type", "/v1/completions", {"prompt": "x", "logprobs": "all"}, None, 400),
        ("echo with stream", "/v1/completions", {"prompt": "x", "echo": True, "stream": True}, None, 400),
        ("prompt_logprobs with stream", "/v1/completions", {"prompt": "x", "prompt_logprobs": 1, "stream": True}, None,
         400),
        ("prompt_logprobs 21", "/v1/completions", {"prompt": "x", "prompt_logprobs": 21}, None, 400),
        ("prompt_logprobs -1", "/v1/completions", {"prompt": "x", "prompt_logprobs": -1}, None, 400),
        ("truncate_prompt_tokens 0", "/v1/completions", {"prompt": "x", "truncate_prompt_tokens": 0}, None, 400),
        ("priority without --scheduling-policy priority", "/v1/completions", {"prompt": "x", "priority": 1}, None,
         400),
        ("include_stop_str_in_output not a boolean", "/v1/completions",
         {"prompt": "x", "include_stop_str_in_output": "yes"}, None, 400),
        ("max_tokens 0 without echo", "/v1/completions", {"prompt": "x", "max_tokens": 0}, None, 400),
        ("chat top_logprobs without logprobs", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, None, 400),
        ("chat logprobs not a boolean", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "x"}], "logprobs": 2}, None, 400),
        ("chat echo", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "echo": True}, None, 400),
        ("unknown model", "/v1/completions", {"model": "gpt-17", "prompt": "x"}, None, 404),
        ("model of wrong type", "/v1/completions", {"model": 3, "prompt": "x"}, None, 400),
        ("body over 4 MiB", "/v1/completions", None, b'{"prompt": "' + b"a" * (4 * 1024 * 1024 + 10) + b'"}', 413),
        ("U+0000 in the prompt", "/v1/completions", None, b'{"prompt": "abc\\u0000def", "max_tokens": 2}', 400),
        ("U+0000 in a message", "/v1/chat/completions", None,
         b'{"messages": [{"role": "user", "content": "hi\\u0000there"}], "max_tokens": 2}', 400),
        ("U+0000 to /tokenize", "/tokenize", None, b'{"prompt": "abc\\u0000def"}', 400),
    ]
    for what, path, body, raw, want in cases:
        st, js, out = request(port, "POST", path, body=body, raw=raw)
        check(st == want and is_error_obj(js), f"bad input: {what} -> {st} (want {want}) with an error object")
    # an escaped backslash before u0000 is plain text, not U+0000
    st, js, _ = request(port, "POST", "/v1/completions", raw=b'{"prompt": "abc\\\\u0000def", "max_tokens": 2}')
    check(st == 200 and js["usage"]["prompt_tokens"] > 3, "an escaped backslash then u0000 is accepted as text")
    st, js, _ = request(port, "GET", "/v1/nothing")
    check(st == 404 and is_error_obj(js), "unknown endpoint -> 404")
    st, js, _ = request(port, "GET", "/v1/completions")
    check(st == 405 and is_error_obj(js), "GET on a POST endpoint -> 405")
    st, evs, done = stream(port, "/v1/completions", {"prompt": "x", "max_tokens": -1, "stream": True})
    check(st == 400 and is_error_obj(evs[0]), "bad input on a stream request -> 400 before any event")
    st, js, _ = request(port, "POST", "/v1/completions",
                        {"prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True})
    check(st == 200 and js["choices"][0]["text"] == ref_text, "after the bad inputs the server still serves")

    # ---- prefix caching (dense serving, on by default): a repeated long prompt attaches its blocks ----
    def prefix_counts():
        m = metrics(port)
        return m.get("vllm:prefix_cache_queries_total"), m.get("vllm:prefix_cache_hits_total")
    story = " ".join(f"Line {i}: the harbour keeps {i * 3 % 17} boats." for i in range(40))
    q0, h0 = prefix_counts()
    outs = []
    for _ in range(2):
        st, js, _ = request(port, "POST", "/v1/completions", {"prompt": story, "max_tokens": 12, "temperature": 0})
        outs.append((st, js))
    q1, h1 = prefix_counts()
    n_story = outs[0][1]["usage"]["prompt_tokens"] if outs[0][0] == 200 else 0
    check(q0 is not None and q1 - q0 == 2 * n_story and h1 - h0 >= n_story - 16,
          f"prefix cache: the repeated {n_story}-token prompt hit {h1 - h0 if h0 is not None else '?'} of its tokens")
    check(all(st == 200 for st, _ in outs) and outs[0][1]["choices"][0]["text"] == outs[1][1]["choices"][0]["text"],
          "prefix cache: the repeated prompt gives the same greedy text")
    # vLLM's prefix_repetition dataset in `oasiskv bench serve`: 12 prompts over 2 shared 150-word prefixes
    r, res = bench_json(port, "--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "150",
                        "--prefix-repetition-suffix-len", "10", "--prefix-repetition-num-prefixes", "2",
                        "--prefix-repetition-output-len", "4", "--num-prompts", "12", "--max-concurrency", "2")
    check(r.returncode == 0 and res.get("completed") == 12 and res.get("prefix_cache_hit_rate", 0) > 50
          and "Prefix cache hit rate" in r.stdout,
          f"bench serve --dataset-name prefix_repetition: {res.get('completed')} done, hit rate "
          f"{res.get('prefix_cache_hit_rate')} %")

    # vLLM's bench serve options: --host/--port, --backend openai-chat, prompts of exact token lengths with
    # --tokenizer, --random-range-ratio, --percentile-metrics with e2el, --metric-percentiles, --save-result
    rdir = f"/tmp/okv_test_bench_res_{os.getpid()}"
    os.makedirs(rdir, exist_ok=True)
    r = subprocess.run([CLI, "bench", "serve", "--backend", "openai-chat", "--host", "127.0.0.1", "--port", str(port),
                        "--num-prompts", "6", "--max-concurrency", "3", "--random-input-len", "60",
                        "--random-output-len", "6", "--tokenizer", os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"),
                        "--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,90", "--save-result",
                        "--result-dir", rdir, "--label", "x", "--trust-remote-code"], capture_output=True, text=True, timeout=300)
    files = os.listdir(rdir)
    res = json.load(open(os.path.join(rdir, files[0]))) if len(files) == 1 else {}
    for f in files:
        os.unlink(os.path.join(rdir, f))
    os.rmdir(rdir)
    check(r.returncode == 0 and res.get("completed") == 6 and "P90 E2EL (ms):" in r.stdout and "P50 TTFT (ms):" in r.stdout
          and "Mean TPOT" not in r.stdout and all(k in res for k in ("p50_ttft_ms", "p90_e2el_ms", "std_e2el_ms")),
          f"bench serve with vLLM's options (chat backend, host/port, e2el, P50/P90, --save-result): "
          f"{res.get('completed')} done, {len(files)} result file(s)")
    # the chat template adds tokens around each 60-token prompt: the same number for each
    check(res.get("total_input_tokens", 0) % 6 == 0 and res.get("total_input_tokens", 0) >= 6 * 60,
          f"--tokenizer: prompts of exactly 60 tokens (total {res.get('total_input_tokens')} over 6 chat requests)")
    r, res = bench_json(port, "--num-prompts", "8", "--random-input-len", "40", "--random-output-len", "8",
                        "--random-range-ratio", "0.5", "--tokenizer",
                        os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))
    check(r.returncode == 0 and res.get("completed") == 8 and 8 * 4 <= res.get("total_output_tokens", 0) <= 8 * 12
          and res.get("total_output_tokens") != 64 and 8 * 20 <= res.get("total_input_tokens", 0) <= 8 * 60,
          f"--random-range-ratio 0.5: {res.get('total_input_tokens')} input and {res.get('total_output_tokens')} output "
          f"tokens over 8 requests")

    # `bench serve --max-duration`: requests in flight at the limit are cut (the server cancels them and frees
    # their KV), the rest are not sent; the report counts the cut requests' streamed tokens apart
    t0 = time.time()
    r, res = bench_json(port, "--num-prompts", "6", "--max-concurrency", "3", "--random-input-len", "20",
                        "--random-output-len", "900", "--max-duration", "2.5", timeout=120)
    dt = time.time() - t0
    check(r.returncode == 0 and res.get("completed") == 0 and res.get("failed") == 0 and res.get("cut_requests") == 3
          and res.get("not_sent_requests") == 3 and res.get("cut_output_tokens", 0) > 3
          and 2.4 < res.get("duration", 0) < 4 and dt < 20 and "Requests cut at --max-duration:" in r.stdout,
          f"bench serve --max-duration 2.5: {res.get('cut_requests')} cut with {res.get('cut_output_tokens')} tokens, "
          f"{res.get('not_sent_requests')} not sent, {res.get('duration', 0):.2f} s, exit {r.returncode}")
    idle, m = wait_idle(port)
    check(idle and m.get("vllm:num_requests_running") == 0, "the cut requests are cancelled and their KV freed")

    # ---- API key (a second server: sparse, with an FP8 E4M3 host tier) ----
    # sparse from the start (--no-dense-while-room), so that a long prompt selects and fetches
    srv2 = Server("--api-key", "sekret", "--kv-budget", "256", "--kv-host-dtype", "fp8", "--no-dense-while-room")
    p2 = srv2.port
    body = {"prompt": prompt, "max_tokens": 2}
    st, js, _ = request(p2, "POST", "/v1/completions", body)
    check(st == 401 and is_error_obj(js), "API key: none -> 401 with an error object")
    st, js, _ = request(p2, "POST", "/v1/completions", body, headers={"Authorization": "Bearer wrong"})
    check(st == 401 and is_error_obj(js), "API key: wrong -> 401")
    st, js, _ = request(p2, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
    check(st == 401, "API key: /v1/models needs it too")
    st, js, _ = request(p2, "POST", "/v1/completions", body, headers={"Authorization": "Bearer sekret"})
    check(st == 200 and js["usage"]["prompt_tokens"] == n_prompt, "API key: right -> 200")
    st, _, _ = request(p2, "GET", "/health")
    check(st == 200, "API key: /health stays open")
    try:
        openai.OpenAI(base_url=f"http://127.0.0.1:{p2}/v1", api_key="wrong", max_retries=0).models.list()
        check(False, "openai client with a wrong key raises AuthenticationError")
    except openai.AuthenticationError:
        check(True, "openai client with a wrong key raises AuthenticationError")
    r = openai.OpenAI(base_url=f"http://127.0.0.1:{p2}/v1", api_key="sekret", max_retries=0).completions.create(
        model="smol", prompt=prompt, max_tokens=2)
    check(r.usage.completion_tokens >= 1, "openai client with the right key works")
    long_prompt = " ".join(f"item {i} is {i * 7 % 13}." for i in range(120))   # past the budget: selection and fetches
    st, js, _ = request(p2, "POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 8, "temperature": 0},
                        headers={"Authorization": "Bearer sekret"})
    check(st == 200 and js["usage"]["prompt_tokens"] > 256, "sparse server with an fp8 host tier answers a long prompt")
    st, _, raw = request(p2, "GET", "/metrics", headers={"Authorization": "Bearer sekret"})
    fetched = re.search(r"^oasiskv:fetch_bytes_total(?:\{[^}]*\})? ([0-9.e+]+)$", raw.decode(), re.M)
    blocks = re.search(r"^oasiskv:blocks_fetched_total(?:\{[^}]*\})? ([0-9.e+]+)$", raw.decode(), re.M)
    # a fetched unit is one KV head's block of K and V: 16 tokens x head_dim 64 x 2, one byte each in fp8
    # (the CPU backend's float tier would move 8192)
    per = float(fetched.group(1)) / float(blocks.group(1)) if fetched and blocks and float(blocks.group(1)) > 0 else 0
    check(st == 200 and per == 2048, f"fp8 host tier: {per:.0f} bytes a fetched unit in /metrics (2048 expected)")
    pq = re.search(r"^vllm:prefix_cache_queries_total(?:\{[^}]*\})? ([0-9.e+]+)$", raw.decode(), re.M)
    check(pq is not None and float(pq.group(1)) == 0,
          "sparse server with an fp8 host tier: prefix caching off by default (no cache queries)")
    rc = srv2.stop()
    check(rc == 0, f"second server: SIGTERM -> exit {rc}")

    # ---- sparse serving with prefix caching (a third server, on by default): a repeated long prompt attaches ----
    srv3 = Server("--kv-budget", "256", "--scheduling-policy", "priority")
    p3 = srv3.port
    outs3 = [request(p3, "POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 8, "temperature": 0})
             for _ in range(2)]
    m3 = metrics(p3)
    n_long = outs3[0][1]["usage"]["prompt_tokens"] if outs3[0][0] == 200 else 0
    hit3 = m3.get("vllm:prefix_cache_hits_total", 0)
    check(all(o[0] == 200 for o in outs3) and n_long > 256 and hit3 >= n_long - 16,
          f"sparse prefix caching: the repeated {n_long}-token prompt attached {hit3:.0f} tokens")
    check(all(o[0] == 200 for o in outs3) and outs3[0][1]["choices"][0]["text"] == outs3[1][1]["choices"][0]["text"],
          "sparse prefix caching: the repeated prompt gives the same greedy text")
    # dense while room (the default): the long prompt ran dense, as on the dense server
    st_d, js_d, _ = request(port, "POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 8, "temperature": 0})
    check(st_d == 200 and outs3[0][0] == 200 and js_d["choices"][0]["text"] == outs3[0][1]["choices"][0]["text"]
          and m3.get("oasiskv:blocks_fetched_total", -1) == 0 and m3.get("oasiskv:sparse_demotions_total", -1) == 0
          and "oasiskv:dense_phase_sequences" in m3,
          "sparse server, dense while room: the dense server's greedy text, nothing fetched, no demotion")
    # the priority policy (this server's): a request's priority orders the queue (test_sched), not its tokens
    st_p, js_p, _ = request(p3, "POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 8, "temperature": 0,
                                                            "priority": -5})
    check(st_p == 200 and outs3[0][0] == 200 and js_p["choices"][0]["text"] == outs3[0][1]["choices"][0]["text"],
          "--scheduling-policy priority: a request with priority -5 gives the same greedy text")
    rc = srv3.stop()
    check(rc == 0, f"third server: SIGTERM -> exit {rc}")

    # ---- layer-ahead selection (a fifth server, sparse from the start): each layer's blocks chosen during the
    # step from queries estimated a layer early; the long prompt selects and fetches ----
    srv5 = Server("--kv-budget", "256", "--no-dense-while-room", "--predict", "layer-ahead")
    st5, js5, _ = request(srv5.port, "POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 8, "temperature": 0})
    m5 = metrics(srv5.port)
    check(st5 == 200 and js5["usage"]["prompt_tokens"] > 256 and js5["usage"]["completion_tokens"] == 8
          and m5.get("oasiskv:blocks_fetched_total", 0) > 0,
          f"--predict layer-ahead: the long prompt answered ({st5}), "
          f"{m5.get('oasiskv:blocks_fetched_total', 0):.0f} blocks fetched")
    rc = srv5.stop()
    check(rc == 0, f"layer-ahead server: SIGTERM -> exit {rc}")
    r = subprocess.run([CLI, "serve", "-m", MODEL, "--predict", "next-week"], capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "--predict: 'next-week' is not one of" in r.stderr,
          f"serve --predict next-week: a clear error (exit {r.returncode}: {r.stderr.strip()[:120]})")

    # ---- a vLLM launch line: the model as the first argument, --max-model-len, options taken as they are ----
    srv4 = Server("--dtype", "auto", "--trust-remote-code", "--enable-chunked-prefill", "--disable-log-requests",
                  "--disable-log-stats", model_args=(MODEL,), ctx_args=("--max-model-len", "512"))
    st, js, _ = request(srv4.port, "GET", "/v1/models")
    check(st == 200 and js["data"][0]["max_model_len"] == 512 and js["data"][0]["root"] == MODEL,
          f"vLLM launch line (serve PATH --max-model-len 512 --dtype auto ...): max_model_len "
          f"{js['data'][0]['max_model_len'] if st == 200 else st}")
    rc = srv4.stop()
    check(rc == 0, f"fourth server: SIGTERM -> exit {rc}")
    # --seed: requests without a seed draw reproducibly, in arrival order
    runs = []
    for _ in range(2):
        sv = Server("--seed", "7")
        outs_s = [request(sv.port, "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 12,
                                                                "temperature": 1.0, "ignore_eos": True})
                  for _ in range(2)]
        runs.append([o[1]["choices"][0]["text"] if o[0] == 200 else None for o in outs_s])
        sv.stop()
    check(runs[0] == runs[1] and None not in runs[0] and runs[0][0] != runs[0][1],
          f"serve --seed 7: the same texts after a restart, the two requests apart ({runs[0]})")
    # --generation-config: the model's sampling defaults, as vLLM takes them from generation_config.json
    import tempfile
    with tempfile.TemporaryDirectory() as gdir:
        with open(os.path.join(gdir, "generation_config.json"), "w") as f:
            json.dump({"temperature": 0.0, "repetition_penalty": 1.3, "max_new_tokens": 7, "do_sample": False}, f)
        sv = Server("--generation-config", gdir)
        body = {"prompt": "The cat sat on the mat. The cat", "ignore_eos": True}
        st_d, js_d, _ = request(sv.port, "POST", "/v1/completions", body)
        st_e, js_e, _ = request(sv.port, "POST", "/v1/completions",
                                {**body, "temperature": 0, "repetition_penalty": 1.3, "max_tokens": 7})
        st_o, js_o, _ = request(sv.port, "POST", "/v1/completions", {**body, "max_tokens": 9, "repetition_penalty": 1.0})
        st_p, js_p, _ = request(sv.port, "POST", "/v1/completions",
                                {**body, "temperature": 0, "max_tokens": 9, "repetition_penalty": 1.0})
        check(st_d == 200 and st_e == 200 and js_d["usage"]["completion_tokens"] == 7
              and js_d["choices"][0]["text"] == js_e["choices"][0]["text"]
              and "generation_config.json" in sv.logs(),
              f"--generation-config DIR: a request without sampling fields takes the file's (greedy, repetition 1.3, "
              f"7 tokens): {js_d['choices'][0]['text']!r}")
        check(st_o == 200 and st_p == 200 and js_o["usage"]["completion_tokens"] == 9
              and js_o["choices"][0]["text"] == js_p["choices"][0]["text"] != js_d["choices"][0]["text"],
              "the request's own max_tokens and repetition_penalty win over the file's (its temperature still applies)")
        sv.stop()
        with open(os.path.join(gdir, "generation_config.json"), "w") as f:
            f.write('{"temperature": -1}')
        r = subprocess.run([CLI, "serve", MODEL, "--port", "0", "--generation-config", gdir], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 1 and "temperature" in r.stderr, f"a generation_config.json with temperature -1: exit "
              f"{r.returncode}, {r.stderr.strip()[:90]!r}")
    for extra, what in ((["--gpu-memory-utilization", "0.9"], "--gpu-memory-utilization on the CPU backend"),
                        (["--gpu-memory-utilization", "0.9", "--kv-pool-gb", "1"], "--gpu-memory-utilization with --kv-pool-gb"),
                        (["--dtype", "int3"], "--dtype int3")):
        r = subprocess.run([CLI, "serve", MODEL, "--port", "0", *extra], capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and extra[0] in r.stderr, f"serve {what}: exit {r.returncode}, {r.stderr.strip()[:80]!r}")

    # ---- SIGTERM with a stream in flight ----
    out = {}

    def long_stream():
        out["r"] = stream(port, "/v1/completions", {"prompt": "Write an essay.", "max_tokens": 900, "ignore_eos": True,
                                                    "stream": True})

    t = threading.Thread(target=long_stream)
    t.start()
    time.sleep(1.5)
    t_sig = time.time()
    rc = srv.stop()
    t.join(30)
    dt = time.time() - t_sig
    check(rc == 0 and dt < 20, f"SIGTERM with a stream in flight: exit {rc} in {dt:.1f}s")
    st, evs, done = out.get("r", (None, [], False))
    fins = [e["choices"][0]["finish_reason"] for e in evs if e.get("choices") and e["choices"][0].get("finish_reason")]
    check(st == 200 and done and fins == ["abort"], f"the in-flight stream ends with finish_reason abort ({fins})")
    check("allocations still live" not in srv.logs(), "no server allocations left at exit")


if __name__ == "__main__":
    t_start = time.time()
    try:
        main()
    except Exception as ex:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        failures.append(f"exception: {ex!r}")
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
    if failures:
        for s in servers:
            print(f"--- server log {s.log_path} (tail) ---")
            print(s.logs()[-3000:])
    for s in servers:
        s.log.close()
        try:
            os.unlink(s.log_path)
        except OSError:
            pass
    n_ok = 0
    print(f"server test: {len(failures)} failed in {time.time() - t_start:.1f}s")
    sys.exit(1 if failures else 0)
