#!/bin/bash
# Prepared in session 16 of 2026-11-30 for the next device session (NOT RUN YET): the rows of issue 5's
# grid still missing (bench/RESULTS.md section 24), on the Llama-3-8B shape with the fp8 host tier and
# serve's defaults (dense while room), 16 GiB pool, 256 output tokens, one prompt per slot:
#   part a (this call, ~9 min): 8K c256 with dense while room; 32K c64 dense.
#   part b (PART=b, ~7 min):    32K c64 budget 2048.
#   part e (PART=e):           32K c64 dense and budget 2048 (gpu_run108, after the CUDA tests).
#   part f (PART=f):           32K c256 dense and budget 2048, each cut after 255 s (gpu_run109).
#   part c / d (PART=c / d):    32K c256 dense / budget 2048 (each a call of its own: 9.5M prompt
#                               tokens, ~8 min of prefill for the sparse server; END_S bounds them).
# At 32K the servers run at most ~3 dense / 19 sparse requests at once and queue the rest.
#   [PART=a|b|c|d] [END_S=575] bash bench/gpu_run107.sh   (carry the CUDA build's packed copy, e.g. build-gc;
#                                                          results under $OUT)
set -u
B=${BUILD:-build-gc}
. bench/gpu_env.sh $B
L=/tmp/okv_logs107; mkdir -p $L/serve
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
M="-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json"
END=${END_S:-575}
save() {
  cp $L/*.md $L/serve/startup.txt $OUT/ 2>/dev/null
  for m in $L/serve/metrics_*; do
    [ -f "$m" ] && echo "$(basename $m): $(grep -E '^oasiskv:(sparse_demotions_total|resident_in_time_ratio)|^vllm:num_preemptions' $m | tr '\n' ' ')"
  done > $OUT/metrics_keys.txt
}
stage() {  # stage MD PORT0 KVS CONC CTX IN TAG MIN_S: one serve_ab.sh run, cut at END, skipped under MIN_S left
  local left=$((END - SECONDS))
  [ $left -lt $8 ] && { echo "skipped kv=$3 c=$4 in=$6: ${left} s left" >> $L/$1; return; }
  [ -f $L/$1 ] || printf '%s\n%s\n' "| kv | concurrency | prompts | output tok/s | total tok/s | mean TTFT ms | mean TPOT ms | running (peak) | failed |" \
    "|---|---|---|---|---|---|---|---|---|" > $L/$1
  TAG=$7 PORT0=$2 KVS=$3 OUT=$L/serve CTX=$5 PROMPTS_PER_SLOT=1 timeout $left bash bench/serve_ab.sh $B "$M" 16 $6 256 \
    "$4" 2048 "--device cuda --kv-host-dtype fp8" | grep -v '^|---\|^| kv ' >> $L/$1
  echo "stage kv=$3 c=$4 in=$6: exit ${PIPESTATUS[0]} at ${SECONDS} s" >> $L/stages.txt
  save
}
case ${PART:-a} in
  a) stage serve_8b_8k_c256_room.md 19600 2048 256 9728 8192 room 60
     stage serve_8b_32k_c64.md 19700 dense 64 37376 32768 32k 200 ;;
  b) stage serve_8b_32k_c64.md 19800 2048 64 37376 32768 32k 200 ;;
  c) stage serve_8b_32k_c256.md 19900 dense 256 37376 32768 32k 300 ;;
  d) stage serve_8b_32k_c256.md 20000 2048 256 37376 32768 32k 300 ;;
  f) export MAX_DURATION=${MAX_DURATION:-255}   # gpu_run109: each run cut after 255 s (bench serve --max-duration)
     stage serve_8b_32k_c256.md 19900 dense 256 37376 32768 32k 200
     stage serve_8b_32k_c256.md 20000 2048 256 37376 32768 32k 200 ;;
  e) stage serve_8b_32k_c64.md 19700 dense 64 37376 32768 32k 150
     stage serve_8b_32k_c64.md 19800 2048 64 37376 32768 32k 120 ;;
esac
cp $L/stages.txt $OUT/ 2>/dev/null
cat $L/*.md $L/stages.txt
