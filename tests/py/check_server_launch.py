"""vLLM's launch options on `oasiskv serve` (run by tests/sh/test_server_launch.sh) with the SmolLM2-135M GGUF: a
user's vLLM command line starts the server as it is; the options that cannot hold here stop it with a message
naming them; and those that change replies do so:

- --max-logprobs caps logprobs / top_logprobs / prompt_logprobs; --return-tokens-as-token-ids is the default a
  request may turn off; --response-role is the chat replies' role, streamed and not;
- CORS as vLLM's defaults (every origin, method and header): a browser's preflight is answered (even with
  --api-key: it carries no key), replies carry Access-Control-Allow-Origin, streamed ones too; with a list of
  origins and --allow-credentials the origin is echoed, others get no header and a 400 preflight; '[]' turns it off;
- HTTPS with --ssl-keyfile / --ssl-certfile (a self-signed certificate made by openssl): the official client talks
  to it trusting that certificate; plain HTTP on its port gets no reply; bad files stop the server with a message.
"""
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile

import httpx2 as httpx
import openai

import serve_util
from serve_util import check, failures, post

CLI, MODEL, SRC = sys.argv[1], sys.argv[2], sys.argv[3]


def serving(extra):
    return serve_util.serving(CLI, MODEL, extra, 1024)


def start_fails(extra, needle):
    """the server refuses to start with extra; its message names needle"""
    p = subprocess.run([CLI, "serve", "-m", MODEL, "--port", "0", "--threads", "2", "--ctx", "1024", "--kv-pool-gb",
                        "0.25", *extra], capture_output=True, text=True, timeout=60)
    msg = (p.stderr or p.stdout).strip().splitlines()
    last = msg[-1] if msg else ""
    check(p.returncode != 0 and needle in last, f"refused {' '.join(extra)!r} (exit {p.returncode}): {last[:120]}")


def raw(port, method, path, headers=None, body=None):
    """(status, headers as a lower-cased dict, body bytes) of one plain HTTP request"""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    h = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, h, data


def main():
    # a vLLM command line as users write it (the options this engine has no use for taken as they are)
    vllm_line = ["--dtype", "auto", "--trust-remote-code", "--enable-auto-tool-choice", "--enforce-eager",
                 "--kv-cache-dtype", "auto", "--swap-space", "4", "--max-seq-len-to-capture", "8192",
                 "--tokenizer-mode", "auto", "--revision", "main", "--download-dir", "/tmp", "--pipeline-parallel-size",
                 "1", "--data-parallel-size", "1", "--cpu-offload-gb", "0", "--uvicorn-log-level", "warning",
                 "--disable-frontend-multiprocessing", "--guided-decoding-backend", "xgrammar", "--quantization", "gguf",
                 "--root-path", "/", "--limit-mm-per-prompt", "image=0", "--disable-log-requests", "--disable-log-stats",
                 "--enable-prefix-caching", "--enable-chunked-prefill"]
    with serving(vllm_line) as port:
        st, js = post(port, "/v1/completions", {"prompt": "Hello", "max_tokens": 3, "temperature": 0})
        check(st == 200 and js["usage"]["completion_tokens"] == 3, f"a vLLM command line of {len(vllm_line)} words: "
              f"the server starts and serves ({js.get('choices', [{}])[0].get('text')!r})")
    start_fails(["--kv-cache-dtype", "fp8"], "--kv-cache-dtype fp8")
    start_fails(["--pipeline-parallel-size", "2"], "--pipeline-parallel-size")
    start_fails(["--cpu-offload-gb", "4"], "--cpu-offload-gb")
    start_fails(["--tokenizer-mode", "mistral"], "--tokenizer-mode mistral")
    start_fails(["--tool-call-parser", "mistral"], "--tool-call-parser mistral")
    start_fails(["--tool-call-parser", "hermes"], "offers no tools")   # SmolLM2's own template has none
    start_fails(["--max-logprobs", "21"], "--max-logprobs 21")
    start_fails(["--allowed-origins", "http://a"], "--allowed-origins")
    start_fails(["--ssl-keyfile", "/nonexistent"], "--ssl-keyfile and --ssl-certfile")
    start_fails(["--lora-modules", "a=b"], "unknown option '--lora-modules'")

    # reply options
    with serving(["--max-logprobs", "2", "--return-tokens-as-token-ids", "--response-role", "bot"]) as port:
        st, js = post(port, "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0, "logprobs": 2})
        toks = js["choices"][0]["logprobs"]["tokens"] if st == 200 else []
        check(st == 200 and all(t.startswith("token_id:") for t in toks) and len(toks) == 2,
              f"--return-tokens-as-token-ids: {toks}")
        st, js = post(port, "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0, "logprobs": 2,
                                                "return_tokens_as_token_ids": False})
        toks = js["choices"][0]["logprobs"]["tokens"] if st == 200 else []
        check(st == 200 and not any(t.startswith("token_id:") for t in toks), f"... turned off by the request: {toks}")
        for body, param in (({"prompt": "Hello", "logprobs": 3}, "logprobs"),
                            ({"prompt": "Hello", "prompt_logprobs": 3}, "prompt_logprobs")):
            st, js = post(port, "/v1/completions", dict(body, max_tokens=1))
            check(st == 400 and js["error"]["param"] == param, f"--max-logprobs 2: {param} 3 refused: "
                  f"{js['error']['message'][:80]}")
        msgs = [{"role": "user", "content": "Hi"}]
        st, js = post(port, "/v1/chat/completions", {"messages": msgs, "max_tokens": 2, "logprobs": True, "top_logprobs": 3})
        check(st == 400 and js["error"]["param"] == "top_logprobs", "--max-logprobs 2: chat top_logprobs 3 refused")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=3, temperature=0)
        roles = [c.choices[0].delta.role for c in client.chat.completions.create(
            model="smol", messages=msgs, max_tokens=3, temperature=0, stream=True) if c.choices and c.choices[0].delta.role]
        check(r.choices[0].message.role == "bot" and roles == ["bot"], f"--response-role bot: {r.choices[0].message.role}, "
              f"streamed {roles}")

    # CORS: vLLM's defaults, with an API key
    with serving(["--api-key", "k"]) as port:
        pre = {"Origin": "http://ui.example", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type"}
        st, h, _ = raw(port, "OPTIONS", "/v1/chat/completions", pre)
        check(st == 200 and h.get("access-control-allow-origin") == "*" and "POST" in h.get("access-control-allow-methods", "")
              and h.get("access-control-allow-headers") == "authorization, content-type",
              f"preflight (no key): {st}, allow-origin {h.get('access-control-allow-origin')}, methods "
              f"{h.get('access-control-allow-methods')}, headers {h.get('access-control-allow-headers')}")
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
        st, h, _ = raw(port, "POST", "/v1/chat/completions", {"Origin": "http://ui.example", "Authorization": "Bearer k",
                                                               "Content-Type": "application/json"}, body)
        st2, h2, _ = raw(port, "POST", "/v1/chat/completions", {"Origin": "http://ui.example",
                                                                 "Content-Type": "application/json"}, body)
        st3, h3, data = raw(port, "POST", "/v1/chat/completions", {"Origin": "http://ui.example", "Authorization": "Bearer k",
                                                                    "Content-Type": "application/json"}, dict(body, stream=True))
        st4, h4, _ = raw(port, "GET", "/health")
        check(st == 200 and h.get("access-control-allow-origin") == "*" and st2 == 401 and
              h2.get("access-control-allow-origin") == "*" and st3 == 200 and h3.get("access-control-allow-origin") == "*"
              and b"[DONE]" in data and "access-control-allow-origin" not in h4,
              f"replies to an Origin carry allow-origin * (200, 401 without the key, streamed); none without an Origin")
    with serving(["--allowed-origins", '["http://a.example"]', "--allowed-methods", '["GET", "POST"]',
                  "--allowed-headers", '["Authorization"]', "--allow-credentials"]) as port:
        st, h, _ = raw(port, "GET", "/v1/models", {"Origin": "http://a.example"})
        st2, h2, _ = raw(port, "GET", "/v1/models", {"Origin": "http://b.example"})
        check(st == 200 and h.get("access-control-allow-origin") == "http://a.example" and h.get("vary") == "Origin" and
              h.get("access-control-allow-credentials") == "true" and st2 == 200 and
              "access-control-allow-origin" not in h2, "a listed origin echoed with credentials; another gets none")
        ok = raw(port, "OPTIONS", "/v1/models", {"Origin": "http://a.example", "Access-Control-Request-Method": "POST",
                                                 "Access-Control-Request-Headers": "Authorization, Content-Type"})
        bad_o = raw(port, "OPTIONS", "/v1/models", {"Origin": "http://b.example", "Access-Control-Request-Method": "GET"})
        bad_m = raw(port, "OPTIONS", "/v1/models", {"Origin": "http://a.example", "Access-Control-Request-Method": "DELETE"})
        bad_h = raw(port, "OPTIONS", "/v1/models", {"Origin": "http://a.example", "Access-Control-Request-Method": "GET",
                                                    "Access-Control-Request-Headers": "X-Secret"})
        check(ok[0] == 200 and ok[1].get("access-control-allow-methods") == "GET, POST" and
              ok[1].get("access-control-allow-headers") == "authorization" and
              [bad_o[0], bad_m[0], bad_h[0]] == [400, 400, 400] and b"origin" in bad_o[2] and b"method" in bad_m[2]
              and b"headers" in bad_h[2],
              f"preflights: allowed {ok[0]}; another origin, method, header: {bad_o[0]} {bad_m[0]} {bad_h[0]} "
              f"({bad_o[2].decode()}; {bad_m[2].decode()}; {bad_h[2].decode()})")
    with serving(["--allowed-origins", "[]"]) as port:
        st, h, _ = raw(port, "GET", "/v1/models", {"Origin": "http://a.example"})
        st2, _, _ = raw(port, "OPTIONS", "/v1/models", {"Origin": "http://a.example", "Access-Control-Request-Method": "GET"})
        check(st == 200 and "access-control-allow-origin" not in h and st2 == 405,
              f"--allowed-origins '[]': no CORS headers, OPTIONS not answered as a preflight ({st2})")

    # HTTPS
    if not shutil.which("openssl"):
        check(False, "openssl is needed to make the test certificate (scripts/setup.sh installs it)")
        return
    tdir = tempfile.mkdtemp()
    try:
        key, cert = os.path.join(tdir, "key.pem"), os.path.join(tdir, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=60)
        with serving(["--ssl-keyfile", key, "--ssl-certfile", cert]) as port:
            client = openai.OpenAI(base_url=f"https://127.0.0.1:{port}/v1", api_key="x",
                                   http_client=httpx.Client(verify=ssl.create_default_context(cafile=cert)))
            r = client.completions.create(model="smol", prompt="Hello", max_tokens=3, temperature=0)
            chunks = list(client.completions.create(model="smol", prompt="Hello", max_tokens=3, temperature=0,
                                                    stream=True))
            streamed = "".join(c.choices[0].text for c in chunks if c.choices)
            try:
                raw(port, "GET", "/health")
                plain = "answered"
            except (http.client.HTTPException, OSError) as e:
                plain = type(e).__name__
            check(r.usage.completion_tokens == 3 and streamed == r.choices[0].text and plain != "answered",
                  f"HTTPS: the client trusting the certificate gets {r.choices[0].text!r} (streamed the same); plain "
                  f"HTTP on the port: {plain}")
        start_fails(["--ssl-keyfile", cert, "--ssl-certfile", key], "")   # swapped: not a TLS identity
        open(os.path.join(tdir, "junk.pem"), "w").write("not a pem\n")
        start_fails(["--ssl-keyfile", os.path.join(tdir, "junk.pem"), "--ssl-certfile", cert], "is not a PEM file")
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


main()
print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
