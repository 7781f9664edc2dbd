#!/bin/bash
# Dense against OasisKV behind the same HTTP server and the same device KV pool:
# for each concurrency, start `oasiskv serve` dense and with --kv-budget, run
# `oasiskv bench serve`, and print one table row per run.
# DATASET=FILE sends the prompts of FILE (bench serve --dataset: JSON lines with a "prompt")
# instead of random words; BENCH_ARGS adds arguments to bench serve (e.g. --random-range-ratio 0.5); TAG prefixes the names of the runs' files and rows; MAX_DURATION=S ends
# each run after S seconds (bench serve --max-duration: the row then gives completed + cut requests and
# the output throughput without / with the tokens of the cut ones).
#   [PROMPTS_PER_SLOT=2] [CTX=context] [DATASET=file] [TAG=name] bench/serve_ab.sh BUILD_DIR MODEL_ARGS POOL_GB INPUT_LEN OUTPUT_LEN "CONCURRENCIES" [BUDGET] [extra serve args]
# Example (GPU): bench/serve_ab.sh build-gpu "-m bench/configs/smollm2-135m --load-format dummy \
#   --tokenizer tests/data/smollm2" 2 4096 256 "1 16 64 256" 2048 "--device cuda"
set -u
B=$1; MODEL=$2; POOL=$3; IN=$4; OUTL=$5; CONCS=$6; BUDGET=${7:-2048}; EXTRA=${8:-}
OUT=${OUT:-/tmp/okv_out}
mkdir -p "$OUT"
port=${PORT0:-18300}
echo "| kv | concurrency | prompts | output tok/s | total tok/s | mean TTFT ms | mean TPOT ms | running (peak) | failed |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $CONCS; do
  for kv in ${KVS:-dense $BUDGET}; do
    port=$((port + 1))
    n=$((c * ${PROMPTS_PER_SLOT:-2})); [ $n -lt 8 ] && n=8
    t=${TAG:+${TAG}_}$kv
    log="$OUT/serve_${t}_c${c}.log"
    $B/oasiskv serve $MODEL --port $port --kv-budget $kv --kv-pool-gb $POOL --max-num-seqs 512 \
      --max-num-batched-tokens 2048 --ctx ${CTX:-$((IN + OUTL + 64))} $EXTRA > "$log" 2>&1 &
    pid=$!
    # a large pinned host tier takes a while to allocate: wait up to ${START_S:-600} s
    t0=$(date +%s)
    until curl -sf http://127.0.0.1:$port/health > /dev/null; do
      kill -0 $pid 2>/dev/null || break
      [ $(( $(date +%s) - t0 )) -ge ${START_S:-600} ] && break
      sleep 0.5
    done
    echo "server $t c$c: up after $(( $(date +%s) - t0 )) s" >> "$OUT/startup.txt"
    # sample the number of running requests while the benchmark runs
    ( peak=0; while kill -0 $pid 2>/dev/null; do
        r=$(curl -s http://127.0.0.1:$port/metrics | awk '/^vllm:num_requests_running/ {print int($2)}')
        [ -n "$r" ] && [ "$r" -gt "$peak" ] && peak=$r && echo $peak > "$OUT/peak_${t}_c${c}"
        sleep 0.5; done ) &
    mon=$!
    $B/oasiskv bench serve --base-url http://127.0.0.1:$port --num-prompts $n --max-concurrency $c \
      --random-input-len $IN --random-output-len $OUTL ${BENCH_ARGS:-} ${DATASET:+--dataset $DATASET} ${MAX_DURATION:+--max-duration $MAX_DURATION} --json "$OUT/bench_${t}_c${c}.json" > "$OUT/bench_${t}_c${c}.txt" 2>&1
    curl -s http://127.0.0.1:$port/metrics > "$OUT/metrics_${t}_c${c}.txt" 2>/dev/null
    kill $pid; wait $pid 2>/dev/null; kill $mon 2>/dev/null
    python3 - "$OUT/bench_${t}_c${c}.json" "$t" "$c" "$(cat $OUT/peak_${t}_c${c} 2>/dev/null || echo ?)" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"| {sys.argv[2]} | {sys.argv[3]} | - | failed: {e} |||||")
    sys.exit(0)
g = lambda *k: next((d[x] for x in k if x in d), float("nan"))
if "cut_requests" in d:   # --max-duration: completed + cut (not sent), throughput without / with the cut ones
    done = f"{d['completed']} + {d['cut_requests']} cut ({d['not_sent_requests']} not sent) in {d['duration']:.0f} s"
    tput = f"{d['output_throughput']:.1f} / {d['output_throughput_with_cut']:.1f}"
else:
    done, tput = g('completed', 'successful_requests'), f"{g('output_throughput'):.1f}"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {done} | {tput} | "
      f"{g('total_token_throughput'):.1f} | {g('mean_ttft_ms'):.1f} | {g('mean_tpot_ms'):.2f} | {sys.argv[4]} | {g('failed','failed_requests')} |")
PY
  done
done
