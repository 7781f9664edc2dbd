#!/bin/bash
# GPU session of 2026-11-30 (16), one H200: dense while room (sparse serving keeps a request dense
# while the device pool has room; serve's default now). (1) test_dense_room (its CUDA part: kv_move,
# demotions on the CUDA backend), test_prefix, test_sched, test_cuda_engine; (2) the reasoning shape
# (~1K-token English prompts, 16384 output tokens, 2 GiB pool, budget 2048, fp8 host tier) at
# concurrency 1, 16, 64, 256 with dense while room; c16 also sparse from the start
# (--no-dense-while-room) against session 15's 19850.8; dense at c1 and c64 again.
#   bash bench/gpu_run101.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in dense_room prefix sched cuda_engine; do
  timeout 150 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
grep -h "FAIL" $OUT/*.txt | head -8
grep -h "^  \(room\|demotion\|pressure\|scheduler\)" $OUT/dense_room.txt
L=/tmp/okv_logs101; mkdir -p $L
bash bench/make_text_prompts.sh build-gc2/oasiskv train/checkpoints/run3/target 1024 256 /tmp/text1k_256.jsonl
port=26000
run() {   # concurrency kv extra tag
  local c=$1 kv=$2 extra=$3 tag=$4 pps=1; [ $c = 1 ] && pps=2
  port=$((port + 100))
  TAG=reason101_$tag KVS=$kv PORT0=$port DATASET=/tmp/text1k_256.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
    PROMPTS_PER_SLOT=$pps timeout ${5:-150} bash bench/serve_ab.sh build-gc2 "-m train/checkpoints/run3/target" 2 1000 16384 $c \
    2048 "$extra" >> $L/serve_reason.md 2>&1
  m=$(ls $L/serve/metrics_reason101_${tag}_*c$c.txt 2>/dev/null | head -1)
  dm=""; [ -n "$m" ] && dm=$(grep -E "^oasiskv:(sparse_demotions_total|blocks_fetched_total)" $m | tr '\n' ' ')
  echo "c$c $tag: $(tail -1 $L/serve_reason.md) $dm"
}
run 1 2048 "--device cuda --kv-host-dtype fp8" room
run 1 dense "--device cuda" dense
run 16 2048 "--device cuda --kv-host-dtype fp8" room
run 16 2048 "--device cuda --kv-host-dtype fp8 --no-dense-while-room" sparse
run 64 2048 "--device cuda --kv-host-dtype fp8" room
run 64 dense "--device cuda" dense
run 256 2048 "--device cuda --kv-host-dtype fp8" room 170
grep -h "queued step failed\|error" $L/serve/*.log | head -4
cp $L/serve_reason.md $OUT/
