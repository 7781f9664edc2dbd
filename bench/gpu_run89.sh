#!/bin/bash
# GPU session of 2026-11-30 (15), one H200. (1) The CUDA tests on this session's start
# (test_prefix's sparse prefix path on the CUDA backend for the first time); (2) bench_step with
# the new "of which blocked" column (host time blocked waiting for the device inside a step:
# issue - blocked is the host's own work), 8B shape at 8K batch 1/4/16 and the trained target at
# 9K batch 1/64, dense and budget 2048; (3) sparse prefix caching on the 8B shape: 64 prompts
# sharing a ~10.7K-token prefix, c16, 128 output tokens, budget 2048, with and without.
#   [PARTS="1 2 3"] bash bench/gpu_run89.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
P=" ${PARTS:-1 2 3} "
if [[ $P == *" 1 "* ]]; then
  for t in prefix cuda_ops cuda_engine cuda_resid cuda_graph; do
    timeout 240 build-gc/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
  done
  grep -h "FAIL" $OUT/*.txt | head -8; grep -A8 "^cuda backend" $OUT/prefix.txt
fi
if [[ $P == *" 2 "* ]]; then
  timeout 150 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 1,4,16 --ctx 8192 \
    --kv-budget dense,2048 --steps 20 --warmup 3 > $OUT/step_8b.txt 2>&1; cat $OUT/step_8b.txt
  timeout 100 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 1,64 --ctx 9216 \
    --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --steps 50 --warmup 5 > $OUT/step_trained.txt 2>&1
  grep "^| [0-9]" $OUT/step_trained.txt
fi
if [[ $P == *" 3 "* ]]; then
  python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
  python3 bench/make_prefix_prompts.py 64 4000 40 /tmp/pfx8b.jsonl
  port=31000
  for pc in --enable-prefix-caching --no-enable-prefix-caching; do
    port=$((port + 1))
    build-gc/oasiskv serve -m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json \
      --device cuda --kv-pool-gb 16 --kv-host-gb 40 --kv-budget 2048 --ctx 16384 --max-num-seqs 64 \
      --max-num-batched-tokens 2048 --port $port $pc > $OUT/serve_sparse_$pc.log 2>&1 &
    pid=$!
    for i in $(seq 1 240); do curl -sf http://127.0.0.1:$port/health > /dev/null && break; sleep 0.5; done
    timeout 150 build-gc/oasiskv bench serve --base-url http://127.0.0.1:$port --dataset /tmp/pfx8b.jsonl --num-prompts 64 \
      --max-concurrency 16 --random-output-len 128 --json $OUT/bench_sparse_$pc.json > $OUT/bench_sparse_$pc.txt 2>&1
    echo "== sparse $pc"; grep -E "Total input|Request throughput|Output token throughput|Mean TTFT|Median TTFT|Mean TPOT" $OUT/bench_sparse_$pc.txt
    curl -s http://127.0.0.1:$port/metrics | grep -E "^vllm:prefix_cache|^oasiskv:(resident|stall|fetch_bytes)" | tee $OUT/metrics_sparse_$pc.txt
    kill $pid; wait $pid 2>/dev/null
  done
fi
