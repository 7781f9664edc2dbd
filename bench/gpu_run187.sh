#!/bin/bash
# Session 44 of 2026-12-07: the server's draft gate with trials spaced in time (src/sched/sched.c gate_due: the
# mode that measured lower is tried for 3 steps so that its trials cost at most 2% of the throughput, at least 8
# steps apart; decode steps right before a prompt step are not measured), against the build before (build-gc2:
# trials every 24 / 48 / 96 steps). Session 43 (H100, c64 of 4K prompts): a drafted step took 6-7 ms for 4-5
# tokens a request against 1.1 ms for one overlapped, so 3 drafted steps in every 24 were ~45% of the time, and
# adaptive gave 27,500-33,400 tok/s against no drafts' 34,000-37,200 in runs of 5-7 s. Here the runs are longer
# (384 requests at c64, ~10 s; 128 at c16), rows alternate the builds, twice each; the gate's trials logged on the
# second "after" row; then the CUDA tests with the new build.
#   bash bench/park_checkpoints.sh keep run15; bash bench/gpu_run187.sh     (carry build-gc and build-gc2)
#   (CONCS="64 16", REPS="1 2": the concurrencies and repetitions; DEBUG_REP: the repetition whose "after" row logs
#   the gate's trials; TLIM: no new row after that many seconds)
set -u
. bench/gpu_env.sh build-gc
. bench/gpu_env.sh build-gc2
nvidia-smi --query-gpu=name --format=csv,noheader
T=${M16:-train/checkpoints/run15}
L=/tmp/okv_logs187; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv $T/target 4096 384 /tmp/p4k.jsonl
port=38000
for c in ${CONCS:-64 16}; do
  for rep in ${REPS:-1 2}; do
    for v in "nodraft|build-gc|" "before|build-gc2|--draft ngram --spec-tokens 8 --spec-adaptive" \
             "after|build-gc|--draft ngram --spec-tokens 8 --spec-adaptive"; do
      IFS='|' read -r tag bd args <<< "$v"
      [ $SECONDS -lt ${TLIM:-330} ] || { echo "$tag c$c: no time left"; continue; }
      port=$((port + 100)); lvl=info; [ $tag = after ] && [ $rep = ${DEBUG_REP:-2} ] && lvl=debug
      OKV_LOG_LEVEL=$lvl TAG=${tag}$rep KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=$((c == 64 ? 6 : 8)) \
        MAX_DURATION=60 CTX=$((4096 + 1024 + 64)) timeout 90 bash bench/serve_ab.sh $bd "-m $T/target" 2 4000 1024 $c 2048 \
        "--device cuda --kv-key-codes 2 $args" >> $L/serve.md 2>&1
      echo "$tag c$c: $(tail -1 $L/serve.md) steps $(grep -h '^oasiskv:engine_steps_total\|^oasiskv:steps_overlapped' $L/metrics_${tag}${rep}_2048_c$c.txt | awk '{print $2}' | tr '\n' ' ')"
    done
  done
done | tee $OUT/serve.md
for c in ${CONCS:-64 16}; do grep -h "drafted steps" $L/serve_after${DEBUG_REP:-2}_2048_c$c.log | head -60 > $OUT/gate_c$c.txt; done
TD=/tmp/okv_tests; mkdir -p $TD
for t in build-gc/tests/test_cuda_resid build-gc/tests/test_cuda_ops build-gc/tests/test_cuda_engine build-gc/tests/test_cuda_graph \
         build-gc/tests/test_prefix build-gc/tests/test_sched build-gc/tests/test_dense_room build-gc/tests/test_cuda_tp; do
  n=$(basename $t); s=$(date +%s)
  timeout 120 $t > $TD/$n.log 2>&1; rc=$?
  echo "$n: exit $rc ($(( $(date +%s) - s )) s) $(grep -E "checks" $TD/$n.log | tail -1)" | tee -a $OUT/summary.txt
done
grep -h "FAIL" $TD/*.log | head -20
echo "done at $SECONDS s"
