#!/bin/bash
# GPU session of 2026-12-01 (19), one H200: the pure ops of decode-sized batches padded to a few row
# counts (OKV_PAD_ROWS, default on) so that a server's changing batch replays a few captured graphs.
# The CUDA tests first (the engine's buffers now run padded rows: graphs on == off, CUDA == CPU),
# then dense serving, alternated with padding on and off (OKV_PAD_ROWS=0), with the graph counters
# printed when each server stops (OKV_CUDA_GRAPH_STATS=1): SmolLM2-135M shape (random weights) and
# the trained target, c64, 512 prompts of 1024 words and 256 output tokens, both +-50%.
#   bash bench/gpu_run122.sh      (carry build-gc2; results under $OUT; REPS="1 2 3" CAP_S=300: gpu_run123.sh)
set -u
. bench/gpu_env.sh build-gc2
for t in cuda_graph cuda_engine cuda_ops sched dense_room; do
  timeout 240 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt) at $SECONDS s"
done
grep -E "FAIL|300 rows|5-111" $OUT/*.txt | head
for rep in ${REPS:-1 2}; do
  for pad in 1 0; do
    for m in smol target; do
      if [ $m = smol ]; then M="-m bench/configs/smollm2-135m --load-format dummy --tokenizer tests/data/smollm2"; else M="-m train/checkpoints/run3/target"; fi
      OKV_PAD_ROWS=$pad OKV_CUDA_GRAPH_STATS=1 KVS=dense PROMPTS_PER_SLOT=8 CTX=8192 BENCH_ARGS="--random-range-ratio 0.5" \
        TAG=${m}_pad${pad}_r$rep OUT=$OUT/serve bash bench/serve_ab.sh build-gc2 "$M --device cuda" 4 1024 256 "64" 2>&1 | grep "^| ${m}" | tee -a $OUT/serve.md
      grep -h "graphs:" $OUT/serve/serve_${m}_pad${pad}_r${rep}_*.log | tee -a $OUT/serve.md
    done
  done
  echo "rep $rep done at $SECONDS s"
  [ $SECONDS -gt ${CAP_S:-380} ] && break
done
