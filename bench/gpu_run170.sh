#!/bin/bash
# Planned in session 33 of 2026-12-04 (not run yet): what the selection that keeps dense's answers costs a
# server. Run 14's 32K matrix (bench/ACCURACY.md, "Run 14's matrix at 32K") has `--predict layer-ahead
# --kv-key-codes 2` within 0.7 points of dense on seven families where serve's default (`current` with
# Quest's bound alone) loses 7.9 points and more; section 15's reasoning shape (RESULTS §15, §23) measured
# the codes at 1.05x dense's output rate against the bound's 1.50x at c64 (session 12's code). This runs
# the reasoning shape (run 15's target since session 34, ~1K-token English prompts, 16384 output tokens, 2 GiB pool, c64,
# serve defaults otherwise) dense and at budget 2048 five ways: the default, the codes, the codes with
# layer-ahead chosen at each layer's start and after its attention (session 35: the fetch behind the MLP
# alone), layer-ahead alone (last, where time allows);
# one server each, behind the same HTTP front (bench/serve_ab.sh), ~70 s a row.
#   bash bench/gpu_run170.sh      (carry build-gc; C=concurrency, default 64; results: $OUT/logs.tar)
set -u
. bench/gpu_env.sh build-gc
M=${M:-train/checkpoints/run15}
C=${C:-64}
L=/tmp/okv_logs170; mkdir -p $L
ROWS=${ROWS:-dense bound_current codes_current codes_layerahead codes_layerahead_attn bound_layerahead}
bash bench/make_text_prompts.sh build-gc/oasiskv $M/target 1024 $C /tmp/text1k_prompts.jsonl
port=31000
# ROWS: the rows to run (tags); ROW_UNTIL=S: start no row after S seconds of the script; MAXD=S: end each row's
# benchmark after S seconds (bench serve --max-duration; the row counts the cut requests' tokens too)
row() {  # tag kv extra
  case " $ROWS " in *" $1 "*) ;; *) return ;; esac
  [ $SECONDS -lt ${ROW_UNTIL:-100000} ] || { echo "$1: no time left"; return; }
  port=$((port + 100))
  TAG=$1 KVS=$2 PORT0=$port DATASET=/tmp/text1k_prompts.jsonl OUT=$L/serve CTX=$((1024 + 16384 + 64)) PROMPTS_PER_SLOT=1 \
    MAX_DURATION=${MAXD:-} timeout ${T_RUN:-110} bash bench/serve_ab.sh build-gc "-m $M/target" 2 1000 16384 $C 2048 "--device cuda $3" >> $L/serve.md 2>&1
  echo "$1: $(tail -1 $L/serve.md)"
  tar cf $OUT/logs.tar -C $L .
}
row dense dense ""
row bound_current 2048 ""
row codes_current 2048 "--kv-key-codes 2"
row codes_layerahead 2048 "--predict layer-ahead --kv-key-codes 2"
row codes_layerahead_attn 2048 "--predict layer-ahead-attn --kv-key-codes 2"
row bound_layerahead 2048 "--predict layer-ahead"
grep -h "resident_in_time_ratio\|blocks_fetched_total" $L/serve/metrics_* 2>/dev/null | head -12
echo "done at $SECONDS s"
