#!/bin/bash
# GPU session of 2026-11-30 (16), one H200, part 2 of 2 (part 1: bench/gpu_run99.sh): the 8B-shape
# serving A/B at 8K, concurrency 256 with --kv-budget 2048 and the fp8 host tier (CTX=9728, 256
# prompts; REDO_DENSE=1 runs c256 dense first, should part 1 have been cut); then, as time allows,
# 32K-word prompts (36766-37019 tokens with the padded tokenizer, so CTX=37376) at concurrency 1
# (serve_ab.sh's minimum of 8 prompts), dense and 2048 fp8. END_S bounds the whole (seconds).
#   END_S=575 bash bench/gpu_run100.sh   (carry build-gc; results under $OUT: serve_8b_8k_c256.md,
#                                         serve_8b_32k.md, startup.txt, logs.tar, keylines.txt)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs100; mkdir -p $L/serve
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
M="-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json"
END=${END_S:-575}
save() {
  cp $L/*.md $L/serve/startup.txt $OUT/ 2>/dev/null
  grep -iHE "error|failed|warning|holds|allocating|note:|listening|overlap" $L/serve/serve_*.log | cut -c1-300 > $OUT/keylines.txt 2>/dev/null
  tar cf $OUT/logs.tar -C $L serve
}
stage() {  # stage MD PORT0 KVS CONCS CTX IN TAG MIN_S: one serve_ab.sh run, cut at END, skipped under MIN_S left
  local left=$((END - SECONDS))
  [ $left -lt $8 ] && { echo "skipped kv=$3 c=$4 in=$6: ${left} s left" >> $L/$1; return; }
  [ -f $L/$1 ] || printf '%s\n%s\n' "| kv | concurrency | prompts | output tok/s | total tok/s | mean TTFT ms | mean TPOT ms | running (peak) | failed |" \
    "|---|---|---|---|---|---|---|---|---|" > $L/$1
  TAG=$7 PORT0=$2 KVS=$3 OUT=$L/serve CTX=$5 PROMPTS_PER_SLOT=1 timeout $left bash bench/serve_ab.sh build-gc "$M" 16 $6 256 \
    "$4" 2048 "--device cuda --kv-host-dtype fp8" | grep -v '^|---\|^| kv ' >> $L/$1
  echo "stage kv=$3 c=$4 in=$6: exit ${PIPESTATUS[0]} at ${SECONDS} s" >> $L/stages.txt
  save
}
[ "${REDO_DENSE:-0}" = 1 ] && stage serve_8b_8k_c256.md 18500 dense 256 9728 8192 "" 30
stage serve_8b_8k_c256.md 18600 2048 256 9728 8192 "" 30
stage serve_8b_32k.md 18700 dense 1 37376 32768 32k 90
stage serve_8b_32k.md 18800 2048 1 37376 32768 32k 110
cp $L/stages.txt $OUT/
cat $L/*.md $L/serve/startup.txt $L/stages.txt
