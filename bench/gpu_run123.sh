#!/bin/bash
# GPU session of 2026-12-01 (19), one H200: gpu_run122 again, three repetitions, after runs with a
# prefill-sized op (more than 256 rows) stopped being remembered (they had filled the graph table,
# which then dropped the decode graphs too). bench/RESULTS.md section 31.
#   bash bench/gpu_run123.sh      (carry build-gc2; results under $OUT)
REPS="1 2 3" CAP_S=300 exec bash bench/gpu_run122.sh
