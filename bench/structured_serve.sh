#!/bin/bash
# Structured output under load: `oasiskv serve` answers C concurrent chat requests with response_format
# json_object, or with guided_regex (a regular expression's DFA: sentences of lowercase words, REGEX= another),
# and, as the baseline, the same requests unconstrained; N requests in all; one row a server.
# Each row: the wall time, completion tokens/s, how many answers parse as JSON objects (regex rows: fully match
# the regex, Python's re), and from the
# server's /metrics the rows sampled on the host, the structured masks made by walking the vocabulary
# (the rest came from the cache), and the engine thread's time a host-sampled row (masks, draws). The
# structured rows run with the host sampling's pool of threads (the default) and with OKV_HOST_THREADS=1
# (every row masked and drawn on the engine thread, one request after another).
#   bench/structured_serve.sh BUILD_DIR "MODEL ARGS" CONCURRENCY N_REQUESTS [MAX_TOKENS] [extra serve args]
# Example (CPU): bench/structured_serve.sh build "-m models/SmolLM2-135M-Instruct.Q4_1.gguf" 8 16 128
set -u
B=$1; MODEL=$2; C=$3; N=$4; MAXT=${5:-200}; EXTRA=${6:-}
OUT=${OUT:-/tmp/okv_out}
mkdir -p "$OUT"
port=${PORT0:-18700}
echo "| run | concurrency | requests | wall s | completion tok/s | JSON objects | host rows | walks | engine thread ms a row |"
echo "|---|---|---|---|---|---|---|---|---|"
REGEX=${REGEX:-'([A-Z][a-z]*( [a-z]+){2,12}[.!] ?){1,6}'}
for run in "plain|" "json, host pool|" "json, engine thread alone|OKV_HOST_THREADS=1" "regex, host pool|"; do
  name=${run%%|*}; envs=${run#*|}
  port=$((port + 1))
  log="$OUT/structured_${port}.log"
  env $envs $B/oasiskv serve $MODEL --port $port --max-num-seqs $((C > 8 ? C : 8)) $EXTRA > "$log" 2>&1 &
  pid=$!
  for i in $(seq 600); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  python3 - "$port" "$C" "$N" "$MAXT" "$name" "$REGEX" <<'PY'
import concurrent.futures, json, re, sys, time, urllib.request
port, conc, n, maxt, name, regex = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
asks = ["Describe a cat as a JSON object with its name, age and colour.", "List three fruits with their colours.",
        "Give the capital, population and language of France.", "Write a recipe for pancakes: ingredients and steps.",
        "Name two planets and their moons.", "Summarise the plot of a detective story."]
def one(i):
    body = {"messages": [{"role": "user", "content": asks[i % len(asks)] + " Answer in JSON."}], "max_tokens": maxt,
            "temperature": 0.7, "seed": i}
    if name.startswith("json"):
        body["response_format"] = {"type": "json_object"}
    elif name.startswith("regex"):
        body["guided_regex"] = regex
    rq = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(rq, timeout=600))
    txt = r["choices"][0]["message"]["content"]
    if name.startswith("regex"):   # (an answer cut by max_tokens is only a prefix of a match)
        ok = re.fullmatch(regex, txt, re.ASCII) is not None
    else:
        try:
            ok = isinstance(json.loads(txt), dict)
        except ValueError:
            ok = False
    return r["usage"]["completion_tokens"], ok
t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(conc) as ex:
    res = list(ex.map(one, range(n)))
dt = time.time() - t0
toks = sum(r[0] for r in res)
m = {}
for line in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode().splitlines():
    if line.startswith("oasiskv:structured_") or line.startswith("oasiskv:host_sampl"):
        k, v = line.split()[0].split("{")[0], float(line.split()[-1])
        m[k] = v
nm = m.get("oasiskv:host_sampled_rows_total", 0)
ms = 1e3 * m.get("oasiskv:host_sampling_seconds_total", 0) / nm if nm else 0
print(f"| {name} | {conc} | {n} | {dt:.1f} | {toks / dt:.1f} | {sum(r[1] for r in res)} of {n} | {nm:.0f} | "
      f"{m.get('oasiskv:structured_walks_total', 0):.0f} | {ms:.3f} |")
PY
  kill $pid; wait $pid 2>/dev/null
done
