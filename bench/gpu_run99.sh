#!/bin/bash
# GPU session of 2026-11-30 (16), one H200, part 1 of 2 (part 2: bench/gpu_run100.sh): serving
# A/B on a Llama-3-8B shape (random weights) with the current build (overlapped decoding on, the
# prefill kernel by default): 8K-word prompts (9110-9357 tokens with the padded tokenizer, so
# CTX=9728), 256 output tokens, 16 GiB pool, PROMPTS_PER_SLOT=1, concurrency 1 / 16 / 64, dense
# vs --kv-budget 2048 with the fp8 host tier; then concurrency 256 dense. Every stage has a
# timeout so that the whole stays under 580 s and the rows done so far come back.
#   bash bench/gpu_run99.sh      (carry build-gc; results under $OUT: serve_8b_8k.md, startup.txt,
#                                 logs.tar, keylines.txt)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs99; mkdir -p $L/serve
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
M="-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json"
END=${END_S:-575}
save() {
  cp $L/serve_8b_8k.md $L/serve/startup.txt $OUT/ 2>/dev/null
  grep -iHE "error|failed|warning|holds|allocating|note:|listening|overlap" $L/serve/serve_*.log | cut -c1-300 > $OUT/keylines.txt 2>/dev/null
  tar cf $OUT/logs.tar -C $L serve
}
stage() {  # stage PORT0 KVS CONCS EXTRA: one serve_ab.sh run, cut at END
  local left=$((END - SECONDS))
  [ $left -lt 30 ] && { echo "skipped kv=$2 c=$3: ${left} s left" >> $L/serve_8b_8k.md; return; }
  PORT0=$1 KVS=$2 OUT=$L/serve CTX=9728 PROMPTS_PER_SLOT=1 timeout $left bash bench/serve_ab.sh build-gc "$M" 16 8192 256 \
    "$3" 2048 "$4" | grep -v '^|---\|^| kv ' >> $L/serve_8b_8k.md
  echo "stage kv=$2 c=$3: exit ${PIPESTATUS[0]} at ${SECONDS} s" >> $L/stages.txt
  save
}
echo "| kv | concurrency | prompts | output tok/s | total tok/s | mean TTFT ms | mean TPOT ms | running (peak) | failed |" > $L/serve_8b_8k.md
echo "|---|---|---|---|---|---|---|---|---|" >> $L/serve_8b_8k.md
stage 18300 "dense 2048" "1 16 64" "--device cuda --kv-host-dtype fp8"
stage 18400 dense 256 "--device cuda --kv-host-dtype fp8"
cp $L/stages.txt $OUT/
cat $L/serve_8b_8k.md $L/serve/startup.txt $L/stages.txt
