#!/bin/bash
# GPU session of 2026-11-29 (5), one H200: the sparse half of gpu_run14's serving A/B
# (the trained target at ~31K-token prompts, 2 GiB device pool, --kv-budget 2048), with
# the host tier sized automatically (gpu_run14 gave --kv-host-gb 40, whose block
# summaries alone, 2.5 GiB, exceed the 2 GiB pool).
#   bash bench/gpu_run15.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs15; mkdir -p $L
KVS="${KVS:-2048}" OUT=$L/serve_trained CTX=32768 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-560} bash bench/serve_ab.sh build-gc \
  "-m train/checkpoints/run3/target" 2 26500 256 "${CONCS:-1 16 64 256}" 2048 "--device cuda" > $L/serve_trained_32k.md 2>&1
pkill -f "oasiskv serve" 2>/dev/null
tar cf $OUT/logs.tar -C $L .
cat $L/serve_trained_32k.md $L/serve_trained/startup.txt
grep -h "oasiskv serve:" $L/serve_trained/serve_*.log
