#!/bin/bash
# GPU session of 2026-11-30 (9), one H200, new defaults (gather unroll 2, selection stream):
# (1) bench_step on the Llama-3-8B shape, 8K, batch 1/4/16/64, dense vs 2048 (the step figures
# of issue 4 again); (2) the 8B shape served at 32K: c16, 16 prompts of 32768 random words
# (~37K tokens), 1024 output tokens, 16 GiB pool, dense vs 2048.
#   bash bench/gpu_run44.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs44; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
timeout 100 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 1,4,16,64 \
  --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 5 > $L/step_8b.txt 2>&1
grep "^| [0-9]" $L/step_8b.txt; save
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
for kv in dense 2048; do
  TAG=8b_32k_o1k KVS=$kv PORT0=$([ $kv = dense ] && echo 24200 || echo 24300) OUT=$L/serve CTX=41216 PROMPTS_PER_SLOT=1 \
    timeout 230 bash bench/serve_ab.sh build-gc \
    "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 32768 1024 16 2048 \
    "--device cuda" >> $L/serve.md 2>&1
  tail -1 $L/serve.md; save
done
cat $L/serve/startup.txt
