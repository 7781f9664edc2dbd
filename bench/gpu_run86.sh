#!/bin/bash
# GPU session of 2026-11-30 (14), one H200: after the serve fix that cuts an explicit host tier to what
# the sequences the pool holds can use (gpu_run85's fp8 server, with twice the host blocks in the same
# 40 GiB, kept their summaries on the device and admitted 21 sequences instead of 26): the CUDA tests
# (test_cuda_ops now checks the gather's two-code decoder on every pair), then gpu_run85's 8B rows
# with fp8 and bf16 host tiers again (its dense row stands).
#   bash bench/gpu_run86.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
for t in ops engine; do
  timeout 200 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
grep -E "FAIL" $OUT/ops.txt $OUT/engine.txt | head -5; grep -E "e4m3" $OUT/ops.txt
L=/tmp/okv_logs86; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
port=29500
for v in "2048:--device cuda --kv-host-gb 40 --kv-host-dtype fp8:fp8" "2048:--device cuda --kv-host-gb 40:bf16"; do
  kv=${v%%:*}; rest=${v#*:}; extra=${rest%%:*}; tag=${rest##*:}
  port=$((port + 100))
  TAG=8b_8k_o1k_s14b_$tag KVS=$kv PORT0=$port OUT=$L/serve CTX=11264 PROMPTS_PER_SLOT=1 timeout 170 bash bench/serve_ab.sh \
    build-gc "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 8192 1024 64 \
    2048 "$extra" >> $L/serve.md 2>&1
  echo "$tag: $(tail -1 $L/serve.md)"; save
done
for f in $L/serve/metrics_*; do
  echo "$(basename $f): fetched $(awk '/^oasiskv:fetch_bytes_total/ {print $2/1e9}' $f) GB, in time $(awk '/^oasiskv:resident_in_time_ratio/ {print $2}' $f), stall $(awk '/^oasiskv:stall_seconds_total/ {print $2}' $f) s"
done
grep -h "holds\|host tier takes\|allocating the host" $L/serve/serve_*.log
