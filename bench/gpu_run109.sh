#!/bin/bash
# GPU session of 2026-12-01 (17), one H200: the 8B shape's 32K rows at concurrency 256, dense and
# budget 2048. A whole run (256 prompts of ~37K tokens: 9.4M prompt tokens) takes a server 9-11
# minutes, more than a device call, so each run is cut after 255 s (`bench serve --max-duration`):
# the report gives the requests completed and cut and the output throughput with and without the
# cut requests' tokens (gpu_run107.sh part f). The call returns few files: one tarball of the logs.
#   bash bench/gpu_run109.sh      (carry build-gc2; results under $OUT)
set -u
R=$OUT; T=/tmp/okv_out109; mkdir -p $T
OUT=$T BUILD=build-gc2 PART=f END_S=585 bash bench/gpu_run107.sh
cp /tmp/okv_logs107/serve/bench_*.txt /tmp/okv_logs107/serve/startup.txt $T/ 2>/dev/null
grep -h "demot\|preempt\|error" /tmp/okv_logs107/serve/serve_*.log | head -20 > $T/serve_log_keys.txt
tar -C $T -czf $R/run109.tgz .
