#!/bin/bash
# Prepared for the next GPU session (one H200 is enough): check the prefill attention
# kernel (cuda_prefill.cu, OFF by default) and the session's CUDA changes, time it, and,
# if its test passes, rerun the 8B serving A/B at 32K with it on.
#   bash bench/gpu_run10.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs10; mkdir -p $L
for t in build-gc/tests/test_cuda_ops build-gc/tests/test_cuda_engine build-gc/tests/test_cuda_tp; do
  timeout 150 $t > $L/$(basename $t).txt 2>&1; echo "$(basename $t): exit $? $(tail -1 $L/$(basename $t).txt)" | tee -a $L/summary.txt
done
grep -iE "prefill" $L/test_cuda_ops.txt | tail -12
timeout 120 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 > $L/prefill_64.txt 2>&1
OKV_PREFILL_KERNEL=128 timeout 120 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 > $L/prefill_128.txt 2>&1
cat $L/prefill_64.txt $L/prefill_128.txt | tail -20
if grep -q "test_cuda_ops: exit 0" $L/summary.txt; then
  python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
  OKV_PREFILL_KERNEL=1 OUT=$L/serve CTX=41216 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-300} bash bench/serve_ab.sh build-gc \
    "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 32768 256 "16" 2048 \
    "--device cuda" > $L/serve_8b_prefill.md 2>&1
  cat $L/serve_8b_prefill.md $L/serve/startup.txt
fi
tar cf $OUT/logs.tar -C $L .
