#!/bin/bash
# Session 43 of 2026-12-07: the server's draft gate trying the mode that measured lower less often the further
# behind it is (every 24 decode steps within 10% of the other, 48 within 25%, else 96; src/sched/sched.c
# gate_every), against the build before (build-gc: every 24 whatever the gap). gpu_run183/185 (H100): at c64 the
# gate measured drafted steps at ~600 tokens/s a request against ~930 overlapped, and adaptive gave 37,200 tok/s
# against no drafts' 45,800; at c16 adaptive 25,716 against 20,766. Rows alternate the builds, twice each; and the
# CUDA tests once more with the new build (engine.c: a residency reset that fails after a failed forward pass is
# logged, not an abort: gpu_run185's test_cuda_engine aborted there while a server shared the GPU).
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run186.sh     (carry build-gc and build-gc2)
set -u
. bench/gpu_env.sh build-gc
. bench/gpu_env.sh build-gc2
nvidia-smi --query-gpu=name --format=csv,noheader
T=${M16:-train/checkpoints/run16}
L=/tmp/okv_logs186; mkdir -p $L
bash bench/make_text_prompts.sh build-gc/oasiskv $T/target 4096 192 /tmp/p4k.jsonl
port=38000
for c in 64 16; do
  for rep in 1 2; do
    for v in "nodraft|build-gc|" "before|build-gc|--draft ngram --spec-tokens 8 --spec-adaptive" \
             "after|build-gc2|--draft ngram --spec-tokens 8 --spec-adaptive"; do
      IFS='|' read -r tag bd args <<< "$v"
      [ $SECONDS -lt ${TLIM:-400} ] || { echo "$tag c$c: no time left"; continue; }
      port=$((port + 100))
      TAG=$tag KVS=2048 PORT0=$port DATASET=/tmp/p4k.jsonl OUT=$L PROMPTS_PER_SLOT=3 MAX_DURATION=40 \
        CTX=$((4096 + 1024 + 64)) timeout 60 bash bench/serve_ab.sh $bd "-m $T/target" 2 4000 1024 $c 2048 \
        "--device cuda --kv-key-codes 2 $args" >> $L/serve.md 2>&1
      echo "$tag c$c: $(tail -1 $L/serve.md) steps $(grep -h '^oasiskv:engine_steps_total\|^oasiskv:steps_overlapped' $L/metrics_${tag}_2048_c$c.txt | awk '{print $2}' | tr '\n' ' ')"
    done
  done
done | tee $OUT/serve.md
TD=/tmp/okv_tests; mkdir -p $TD
for t in build-gc2/tests/test_cuda_resid build-gc2/tests/test_cuda_ops build-gc2/tests/test_cuda_engine build-gc2/tests/test_cuda_graph \
         build-gc2/tests/test_prefix build-gc2/tests/test_sched build-gc2/tests/test_dense_room build-gc2/tests/test_cuda_tp; do
  n=$(basename $t); s=$(date +%s)
  timeout 120 $t > $TD/$n.log 2>&1; rc=$?
  echo "$n: exit $rc ($(( $(date +%s) - s )) s) $(grep -E "checks" $TD/$n.log | tail -1)" | tee -a $OUT/summary.txt
done
grep -h "FAIL" $TD/*.log | head -20
echo "done at $SECONDS s"
