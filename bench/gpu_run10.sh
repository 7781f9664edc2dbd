#!/bin/bash
# GPU session of 2026-11-29 (10), one H200: check the prefill attention kernel
# (cuda_prefill.cu, OFF by default; prefill-shaped sequences go to it, the others of the
# same call to the decode kernel) and the CUDA tests; time it (kernel alone, and a
# Llama-3-8B-shaped prefill of 2 x 32K tokens through the engine: off / 64 / 128, chunks
# of 2048 and 8192 rows); then the 8B serving A/B at 32K with the kernel on.
#   bash bench/gpu_run10.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs10; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in build-gc/tests/test_cuda_ops build-gc/tests/test_cuda_engine build-gc/tests/test_cuda_tp; do
  timeout 150 $t > $L/$(basename $t).txt 2>&1; echo "$(basename $t): exit $? $(tail -1 $L/$(basename $t).txt)" | tee -a $L/summary.txt
done
grep -iE "prefill" $L/test_cuda_ops.txt | grep -iE "fail|ran" | head -12
save
timeout 60 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 > $L/prefill_64.txt 2>&1
OKV_PREFILL_KERNEL=128 timeout 60 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 > $L/prefill_128.txt 2>&1
cat $L/prefill_64.txt $L/prefill_128.txt | tail -20
save
T8B="-m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20"
for v in 0:2048 1:2048 128:2048 1:8192; do
  k=${v%%:*}; mb=${v##*:}
  echo "prefill 8B 2x32K, OKV_PREFILL_KERNEL=$k, --max-num-batched-tokens $mb: $(OKV_PREFILL_KERNEL=$k timeout 90 build-gc/oasiskv bench throughput $T8B --max-num-batched-tokens $mb 2>&1 | grep -E 'Throughput|rror' | head -2)" | tee -a $L/summary.txt
done
save
if grep -q "test_cuda_ops: exit 0" $L/summary.txt; then
  python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
  left=$((575 - SECONDS))
  OKV_PREFILL_KERNEL=1 OUT=$L/serve CTX=41216 PROMPTS_PER_SLOT=1 timeout $left bash bench/serve_ab.sh build-gc \
    "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 32768 256 "16" 2048 \
    "--device cuda" > $L/serve_8b_prefill.md 2>&1
  pkill -f "oasiskv serve" 2>/dev/null
  cat $L/serve_8b_prefill.md $L/serve/startup.txt
fi
save
