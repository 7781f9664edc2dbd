#!/bin/bash
# GPU session of 2026-12-01 (18), one H200: after gpu_run117, a step whose only host rows are
# logprobs is queued like any other (its rows copied behind the sampled ids, collected with them),
# so it overlaps; requests sampled on the host (here presence_penalty) still take a step of their
# own. The CUDA tests touched (test_sched with test_overlap_text on CUDA, test_cuda_engine,
# test_cuda_graph), then the 8B shape (random weights, dense, serve defaults) under bench serve c64
# (128 x 1000-token prompts, 256 out): alone, beside a client keeping one logprobs request running,
# beside one keeping a presence_penalty request running.
#   bash bench/gpu_run118.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in sched cuda_engine cuda_graph; do
  timeout 200 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
grep -E "text|FAIL" $OUT/sched.txt | head
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
port=21300
for mode in alone logprobs penalty; do
  port=$((port + 1))
  build-gc2/oasiskv serve -m bench/configs/llama3-8b --load-format dummy \
    --tokenizer /tmp/okv_tok8b/tokenizer.json --ctx 8192 --device cuda --port $port > $OUT/serve_$mode.log 2>&1 &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
  case $mode in
    logprobs) extra='"logprobs": 2';;
    penalty) extra='"presence_penalty": 0.5';;
    *) extra='';;
  esac
  bg=""
  if [ -n "$extra" ]; then
    ( while true; do curl -s localhost:$port/v1/completions -H 'Content-Type: application/json' \
        -d '{"model": "llama3-8b", "prompt": "The history of the river", "max_tokens": 400, "temperature": 0.8, '"$extra"'}' > /dev/null || break; done ) &
    bg=$!
  fi
  timeout 200 build-gc2/oasiskv bench serve --base-url http://127.0.0.1:$port --num-prompts 128 --max-concurrency 64 \
    --random-input-len 1000 --random-output-len 256 2>/dev/null | grep -E "Successful|Failed|Output token|Mean TPOT" | sed "s/^/$mode: /"
  curl -s localhost:$port/metrics | grep -E "^oasiskv:steps_(host_rows|overlapped)_total|^oasiskv:engine_steps_total" | sed "s/^/$mode: /"
  [ -n "$bg" ] && kill $bg
  kill $pid; wait $pid 2>/dev/null
done
echo "done at $SECONDS s"
