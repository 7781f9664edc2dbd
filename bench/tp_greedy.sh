#!/bin/bash
# Greedy tokens under tensor parallelism against TP=1 (GPU machine, 2 GPUs or more):
# TP=2 over NCCL (one rank per GPU) and TP=4 with two ranks per GPU (host-staged sums),
# dense and sparse (--kv-budget 32, 4-token blocks), 48 tokens after a 120-token prompt.
#   bench/tp_greedy.sh BUILD MODEL...      (prints a markdown table)
B=$1; shift
prompt=$(python3 -c "import random; r=random.Random(7); print(','.join(str(r.randrange(3, 500)) for _ in range(120)))")
echo "| model | kv | TP=2 (NCCL) tokens equal to TP=1 | TP=4 (2 ranks/GPU) tokens equal |"
echo "|---|---|---|---|"
: > "${ERR:-/tmp/tp_greedy_err.txt}"
for m in "$@"; do
  case "$m" in *.gguf|*/) ;; *) [ -f "$m/config.json" ] || continue;; esac
  p="--prompt-tokens $prompt"
  case "$m" in *SmolLM2*) p="-p $(printf 'The history of the city begins with a small settlement %.0s' 1 2 3 4 5 6 7 8)";; esac
  for kv in dense 32; do
    run() { "$B/oasiskv" generate -m "$m" $p -n 48 --temp 0 --json --ignore-eos --ctx 256 --block-size 4 --kv-budget $kv \
              --device ${DEV:-cuda} "$@" 2>>"${ERR:-/tmp/tp_greedy_err.txt}" | tail -1; }
    a=$(run); b=$(run --tensor-parallel-size 2); c=$(OKV_TP_DEVICES=0,1,0,1 OKV_TP_COMM=local run --tensor-parallel-size 4)
    python3 - "$(basename $m)" "$kv" "$a" "$b" "$c" <<'PY'
import json, sys
name, kv = sys.argv[1], sys.argv[2]
def toks(s):
    try: return json.loads(s)["tokens"]
    except Exception: return None
ref = toks(sys.argv[3])
def cmp(s):
    t = toks(s)
    if ref is None or t is None: return "failed"
    same = 0
    while same < min(len(ref), len(t)) and ref[same] == t[same]: same += 1
    return f"{same}/{len(ref)}" + ("" if same == len(ref) else f" (first difference at {same})")
print(f"| {name} | {kv} | {cmp(sys.argv[4])} | {cmp(sys.argv[5])} |" + ("" if ref is not None else " (TP=1 run failed)"))
PY
  done
done
