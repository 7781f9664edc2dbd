#!/bin/bash
# GPU session of 2026-11-30 (14), one H200: prefix caching. test_prefix (its engine and scheduler
# checks on the CUDA backend too), then a dense Llama-3-8B-shaped server (random weights, padded
# tokenizer, 16 GiB pool) on 64 prompts that share a ~4000-word prefix (bench/make_prefix_prompts.py),
# c16, 128 output tokens, with --enable-prefix-caching (the default) and --no-enable-prefix-caching.
#   bash bench/gpu_run88.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
timeout 120 build-gc/tests/test_prefix > $OUT/prefix.txt 2>&1; echo "test_prefix exit $? $(tail -1 $OUT/prefix.txt)"
grep -E "FAIL|cuda|engine:|scheduler:" $OUT/prefix.txt | head -12
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
python3 bench/make_prefix_prompts.py 64 4000 40 /tmp/pfx8b.jsonl
port=30000
for pc in --enable-prefix-caching --no-enable-prefix-caching; do
  port=$((port + 1))
  build-gc/oasiskv serve -m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json \
    --device cuda --kv-pool-gb 16 --ctx 16384 --max-num-seqs 64 --max-num-batched-tokens 2048 --port $port $pc \
    > $OUT/serve_$pc.log 2>&1 &
  pid=$!
  for i in $(seq 1 120); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 0.5; done
  timeout 150 build-gc/oasiskv bench serve --base-url http://127.0.0.1:$port --dataset /tmp/pfx8b.jsonl --num-prompts 64 \
    --max-concurrency 16 --random-output-len 128 --json $OUT/bench_$pc.json > $OUT/bench_$pc.txt 2>&1
  echo "== $pc"; grep -E "Total input|Request throughput|Output token throughput|Mean TTFT|Median TTFT|Mean TPOT" $OUT/bench_$pc.txt
  curl -s http://127.0.0.1:$port/metrics | grep -E "^vllm:prefix_cache" | tee $OUT/metrics_$pc.txt
  kill $pid; wait $pid 2>/dev/null
done
