#!/bin/bash
# GPU session of 2026-11-30 (16), one H200, after gpu_run101: (1) bench_step of the trained target
# at batch 1 and 16, 9K context: dense against the dense phase of a sparse engine
# (--dense-while-room 1) and the sparse step, overlapped as serve runs them, then the same under
# OKV_CUDA_PROFILE=1 (where the dense phase's extra time goes); (2) the Llama-3-8B shape at 8K
# (gpu_run99's shape: CTX=9728, 256 output tokens, 16 GiB pool, fp8 host tier) at concurrency 1,
# 16 and 64 with dense while room (serve's default now; gpu_run99 ran before it); (3) the long-text
# shape at c256 (gpu_run97) with dense while room.
#   bash bench/gpu_run102.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
S="-m train/checkpoints/run3/target --device cuda --batch 1,16 --ctx 9216 --kv-budget dense,2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 50 --warmup 5 --overlap 1"
timeout 60 build-gc2/bench/bench_step $S --dense-while-room 1 > $OUT/step_room.txt 2>&1
timeout 60 build-gc2/bench/bench_step $S > $OUT/step_sparse.txt 2>&1
grep -h "^| [0-9]\|rror" $OUT/step_room.txt $OUT/step_sparse.txt
OKV_CUDA_PROFILE=1 timeout 60 build-gc2/bench/bench_step ${S/--batch 1,16/--batch 1} --dense-while-room 1 > $OUT/prof_room.txt 2>&1
L=/tmp/okv_logs102; mkdir -p $L
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
M="-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json"
TAG=room8b KVS=2048 PORT0=29000 OUT=$L/serve CTX=9728 PROMPTS_PER_SLOT=1 timeout 230 bash bench/serve_ab.sh build-gc2 "$M" 16 8192 256 \
  "1 16 64" 2048 "--device cuda --kv-host-dtype fp8" > $L/serve_8b_room.md 2>&1
cat $L/serve_8b_room.md | grep "^| room"
for m in $L/serve/metrics_room8b_*; do echo "$m: $(grep -E '^oasiskv:(sparse_demotions_total|blocks_fetched_total)' $m | tr '\n' ' ')"; done
bash bench/make_text_prompts.sh build-gc2/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
TAG=text_room KVS=2048 PORT0=28500 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout 140 bash bench/serve_ab.sh build-gc2 "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
  "--device cuda --kv-host-dtype fp8" > $L/serve_text.md 2>&1
echo "text c256 room: $(tail -1 $L/serve_text.md)"
m=$(ls $L/serve/metrics_text_room_*c256.txt 2>/dev/null | head -1)
[ -n "$m" ] && grep -E "^oasiskv:(sparse_demotions_total|blocks_fetched_total|resident_in_time_ratio)" $m
grep -h "queued step failed\|rror" $L/serve/*.log | head -4
cp $L/serve_8b_room.md $L/serve_text.md $OUT/
