"""What the black-box server tests share (tests/py/check_*_server.py): checks that count failures, starting
`oasiskv serve` on a free port, JSON POSTs."""
import contextlib
import json
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def start(cli, model, extra, ctx=2048):
    """`oasiskv serve` of model (served as "smol") with extra arguments: (process, port)"""
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    p = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "--threads", "2", "--ctx", str(ctx),
                          "--kv-pool-gb", "0.25", "--served-model-name", "smol", *extra],
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        m = re.search(r"listening on https?://127\.0\.0\.1:(\d+)", open(log.name).read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError("server did not start: " + open(log.name).read())


def post(port, path, body, raw=None):
    """(status, JSON reply) of a POST of body (or of the bytes raw)"""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=raw if raw is not None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@contextlib.contextmanager
def serving(cli, model, extra, ctx=2048):
    """a server for the with-block: its port; stopped (SIGTERM) after it, whatever happens"""
    p, port = start(cli, model, extra, ctx)
    try:
        yield port
    finally:
        p.terminate()
        p.wait(30)
