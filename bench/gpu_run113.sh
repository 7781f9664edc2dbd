#!/bin/bash
# GPU session of 2026-12-01 (18), one H200. (a) serve's new GPU defaults (gpu_run111 found the pool
# of --gpu-memory-utilization computed but not used by dense serving, whose slots were sized before
# it; now fixed, and on a GPU 0.9 and --max-num-seqs 256 are the defaults): the 8B shape at 8K and
# the trained target at 32K, dense and budget 2048, started with no sizing flags at all; the startup
# lines, nvidia-smi while up, and bench serve at c64 (8B) / c128 (target) that must finish with no
# failure. (b) the 32K batch-16 step of section 21 in a steady state (150 warm-up steps) with the
# device tier caching 2, 4, 8 and 16 times the selection.
#   bash bench/gpu_run113.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
port=21100
for M in "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json --ctx 8192" \
         "-m train/checkpoints/run3/target --ctx 32768"; do
  for kv in dense 2048; do
    port=$((port + 1))
    log=$OUT/serve_${port}.log
    build-gc2/oasiskv serve $M --device cuda --port $port --kv-budget $kv > $log 2>&1 &
    pid=$!
    for i in $(seq 1 400); do curl -sf localhost:$port/health > /dev/null && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
    echo "== $M kv $kv (up at $SECONDS s): $(grep -h 'gpu-memory-utilization\|device KV tier\|holds\|host KV tier\|error\|trying' $log | tr '\n' ' ' | cut -c1-700)"
    nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
    case "$M" in *llama3*) n=64; c=64; in=6000;; *) n=256; c=128; in=20000;; esac
    timeout 150 build-gc2/oasiskv bench serve --base-url http://127.0.0.1:$port --num-prompts $n --max-concurrency $c \
      --random-input-len $in --random-output-len 64 2>/dev/null | grep -E "Successful|Failed|Output token|Mean TTFT"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader
    curl -s localhost:$port/metrics | grep -E "^(vllm:num_preemptions_total|oasiskv:resident_in_time_ratio|oasiskv:demotions)" | head -4
    kill $pid; wait $pid 2>/dev/null
    echo "done at $SECONDS s"
  done
done
S="--config bench/configs/llama3-8b --device cuda --steps 40 --warmup 150 --kv-host-dtype fp8 --sticky 0.25"
for cf in 2 4 8 16; do
  [ $SECONDS -gt 470 ] && break
  echo "== 32K b16 budget 2048 cache factor $cf, 150 warm-up steps" >> $OUT/step32k.md
  timeout 90 build-gc2/bench/bench_step $S --batch 16 --ctx 32768 --kv-budget 2048 --cache-factor $cf 2>&1 | grep -E "^\| [0-9]|rror" >> $OUT/step32k.md
  tail -1 $OUT/step32k.md; echo "cf $cf done at $SECONDS s"
done
