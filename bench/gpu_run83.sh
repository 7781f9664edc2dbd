#!/bin/bash
# GPU session of 2026-11-30 (14), one H200: the FP8 E4M3 host tier after its gather decodes two
# codes an instruction. (1) test_cuda_ops and test_cuda_engine; (2) bench_step of the trained
# target at the reasoning shape (9K, batch 64 and 100), bf16 and fp8 host tiers alternated twice;
# (3) serving the reasoning shape (section 17: ~1K-token English prompts, 16384 output tokens,
# c64, 2 GiB pool, serve defaults): dense, budget 2048, budget 2048 with --kv-host-dtype fp8;
# (4) the long-text shape (section 14: ~28.6K-token prompts, 4096 output tokens, c256): budget 2048
# with fp8, budget 2048, dense.
#   [PARTS="1 2 3 4"] bash bench/gpu_run83.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs83; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
P=" ${PARTS:-1 2 3 4} "
if [[ $P == *" 1 "* ]]; then
  for t in ops engine; do
    timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
  done
  grep -E "FAIL" $OUT/ops.txt $OUT/engine.txt | head -5
fi
if [[ $P == *" 2 "* ]]; then
  for rep in 1 2; do for b in 64 100; do for h in auto fp8; do
    echo "rep $rep trained b$b 9K host $h: $(timeout 60 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch $b --ctx 9216 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype $h --steps 50 --warmup 5 2>&1 | grep -E "^\| $b ")"
  done; done; done
fi
if [[ $P == *" 3 "* ]]; then
  bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 1024 128 /tmp/text1k_prompts.jsonl
  port=27000
  for v in "2048:--device cuda --kv-host-dtype fp8:fp8" "2048:--device cuda:bf16" "dense:--device cuda:dense"; do
    kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
    port=$((port + 100))
    TAG=reason_s14_$tag KVS=$kv PORT0=$port DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) \
      PROMPTS_PER_SLOT=1 timeout 150 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 1000 16384 64 \
      2048 "$extra" >> $L/serve_reason.md 2>&1
    echo "$tag: $(tail -1 $L/serve_reason.md)"; save
  done
fi
if [[ $P == *" 4 "* ]]; then
  bash bench/make_text_prompts.sh build-gc/oasiskv train/checkpoints/run3/target 28672 64 /tmp/text28k_prompts.jsonl
  port=28000
  for v in "2048:--device cuda --kv-host-dtype fp8:fp8" "2048:--device cuda:bf16" "dense:--device cuda:dense"; do
    kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
    port=$((port + 100))
    TAG=text_s14_$tag KVS=$kv PORT0=$port DATASET=/tmp/text28k_prompts.jsonl OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 \
      timeout 185 bash bench/serve_ab.sh build-gc "-m train/checkpoints/run3/target" 2 24000 4096 256 2048 \
      "$extra" >> $L/serve_text.md 2>&1
    echo "text c256 $tag: $(tail -1 $L/serve_text.md)"; save
  done
fi
