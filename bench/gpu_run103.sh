#!/bin/bash
# GPU session of 2026-11-30 (16), one H200: gpu_run102's step part again (its carry predated
# bench_step --dense-while-room), plus the 8B shape at batch 1: dense against a sparse engine's
# dense phase (--dense-while-room 1), overlapped as serve runs them, and both under
# OKV_CUDA_PROFILE=1 (where the dense phase's extra time goes); then the tests of the change.
#   bash bench/gpu_run103.sh      (carry build-gc2; results under $OUT)
set -u
. bench/gpu_env.sh build-gc2
for t in dense_room prefix sched cuda_engine; do
  timeout 150 build-gc2/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
done
grep -h "FAIL" $OUT/*.txt | head -8; grep -h "^  " $OUT/dense_room.txt
T="-m train/checkpoints/run3/target --device cuda --batch 1,16 --ctx 9216 --kv-budget dense,2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 50 --warmup 5 --overlap 1"
E="--config bench/configs/llama3-8b --device cuda --batch 1 --ctx 8192 --kv-budget dense,2048 --kv-host-dtype fp8 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 3 --overlap 1"
timeout 60 build-gc2/bench/bench_step $T --dense-while-room 1 > $OUT/step_room.txt 2>&1
timeout 90 build-gc2/bench/bench_step $E --dense-while-room 1 > $OUT/step8b_room.txt 2>&1
grep -h "^| [0-9]\|rror" $OUT/step_room.txt $OUT/step8b_room.txt
for kv in dense 2048; do
  OKV_CUDA_PROFILE=1 timeout 60 build-gc2/bench/bench_step ${T/--batch 1,16/--batch 1} --kv-budget $kv --dense-while-room 1 > $OUT/prof_t_$kv.txt 2>&1
  OKV_CUDA_PROFILE=1 timeout 90 build-gc2/bench/bench_step ${E} --kv-budget $kv --dense-while-room 1 > $OUT/prof_8b_$kv.txt 2>&1
done
# the long-text dense baseline with this build (gpu_run102 ran the sparse server; section 22's dense: 15093.0)
L=/tmp/okv_logs103; mkdir -p $L
bash bench/make_text_prompts.sh build-gc2/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
TAG=text_dense KVS=dense PORT0=28700 DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
  timeout 170 bash bench/serve_ab.sh build-gc2 "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
  "--device cuda" > $L/serve_text.md 2>&1
echo "text c256 dense: $(tail -1 $L/serve_text.md)"
cp $L/serve_text.md $OUT/serve_text_dense.md
