#!/bin/bash
# GPU session of 2026-12-01 (18), one H200: a step with one request sampled or scored on the host
# (logprobs, logit_bias, penalties, min_p) used to bring every row's logits to the host and sample
# them all there; now only that request's row comes over and the device samples the rest
# (OKV_SCHED_ALL_ROWS=1: the old path). test_sched on the CUDA backend (test_overlap_text: the same
# tokens both ways), then the 8B shape (random weights, dense, serve defaults) under bench serve
# c64 (128 x 1000-token prompts, 256 out) alone, and beside a client that keeps one request with
# logprobs running, with each path.
#   bash bench/gpu_run117.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
timeout 200 build-gc2/tests/test_sched > $OUT/sched.txt 2>&1; echo "sched exit $? $(tail -1 $OUT/sched.txt)"
grep -E "text|FAIL" $OUT/sched.txt | head
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
port=21200
for mode in alone default all_rows; do
  port=$((port + 1))
  env $([ $mode = all_rows ] && echo OKV_SCHED_ALL_ROWS=1) build-gc2/oasiskv serve -m bench/configs/llama3-8b --load-format dummy \
    --tokenizer /tmp/okv_tok8b/tokenizer.json --ctx 8192 --device cuda --port $port > $OUT/serve_$mode.log 2>&1 &
  pid=$!
  for i in $(seq 1 240); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
  bg=""
  if [ $mode != alone ]; then
    ( while true; do curl -s localhost:$port/v1/completions -H 'Content-Type: application/json' \
        -d '{"model": "llama3-8b", "prompt": "The history of the river", "max_tokens": 400, "logprobs": 2, "temperature": 0.8}' > /dev/null || break; done ) &
    bg=$!
  fi
  timeout 200 build-gc2/oasiskv bench serve --base-url http://127.0.0.1:$port --num-prompts 128 --max-concurrency 64 \
    --random-input-len 1000 --random-output-len 256 2>/dev/null | grep -E "Successful|Failed|Output token|Mean TPOT" | sed "s/^/$mode: /"
  curl -s localhost:$port/metrics | grep -E "^oasiskv:steps_(host_rows|overlapped)_total|^oasiskv:engine_steps_total" | sed "s/^/$mode: /"
  [ -n "$bg" ] && kill $bg
  kill $pid; wait $pid 2>/dev/null
done
echo "done at $SECONDS s"
