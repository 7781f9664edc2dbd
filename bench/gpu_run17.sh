#!/bin/bash
# GPU session of 2026-11-29 (5), one H200: block summaries in bf16 (half the HBM; the
# keys are bf16, so the bounds are unchanged). (1) test_cuda_ops, test_cuda_engine,
# test_cuda_resid; (2) the decode-heavy serving run of the trained target (24000-word
# prompts, 4096 output tokens, 2 GiB pool, --kv-budget 2048, device maps), c64/c128/c256.
#   bash bench/gpu_run17.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs17; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_ops test_cuda_engine test_cuda_resid; do
  timeout 100 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -E "^FAIL" $L/*.txt | head
save
KVS=2048 OUT=$L/serve CTX=32768 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-330} bash bench/serve_ab.sh build-gc \
  "-m train/checkpoints/run3/target" 2 24000 4096 "${CONCS:-64 128 256}" 2048 "--device cuda" > $L/serve_trained_out4096.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
cat $L/serve_trained_out4096.md
grep -h "holds" $L/serve/serve_*.log | head -2
grep -h "oasiskv:\(fetch_bytes\|resident\|stall\)" $L/serve/metrics_*.txt | grep -v "^#"
save
