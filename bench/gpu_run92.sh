#!/bin/bash
# GPU session of 2026-11-30 (15), one H200: overlapped decoding (async scheduling). (1) test_sched
# (its overlapped-decoding part on the CUDA backend: tokens equal to synchronous steps, dense and
# sparse, with a cancellation mid-run), test_prefix, test_cuda_engine, test_cuda_graph; (2) `oasiskv
# bench throughput` (in process, random prompts) with --async-scheduling (the default) and
# --no-async-scheduling, alternated twice: the trained target dense (1024 in / 1024 out, 64 running)
# and budget 2048 (3072 in / 1024 out), the SmolLM2 shape (random weights) dense, and the
# Llama-3-8B shape dense (16 running, 512 in / 256 out).
#   [PARTS="1 2"] bash bench/gpu_run92.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
P=" ${PARTS:-1 2} "
if [[ $P == *" 1 "* ]]; then
  for t in sched prefix cuda_engine cuda_graph; do
    timeout 240 build-gc/tests/test_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(tail -1 $OUT/$t.txt)"
  done
  grep -h "FAIL" $OUT/*.txt | head -8; grep -h "overlapped" $OUT/sched.txt
fi
if [[ $P == *" 2 "* ]]; then
  T="build-gc/oasiskv bench throughput --device cuda"
  for rep in 1 2; do for a in --async-scheduling --no-async-scheduling; do
    echo "== rep $rep $a"
    echo "trained dense: $($T -m train/checkpoints/run3/target --num-prompts 128 --input-len 1024 --output-len 1024 --max-num-seqs 64 $a 2>&1 | grep Throughput)"
    echo "trained 2048: $($T -m train/checkpoints/run3/target --num-prompts 128 --input-len 3072 --output-len 1024 --max-num-seqs 64 --kv-budget 2048 $a 2>&1 | grep Throughput)"
    echo "smollm2 dense: $($T -m bench/configs/smollm2-135m --load-format dummy --num-prompts 128 --input-len 1024 --output-len 512 --max-num-seqs 64 $a 2>&1 | grep Throughput)"
    echo "8b dense: $($T -m bench/configs/llama3-8b --load-format dummy --num-prompts 16 --input-len 512 --output-len 256 --max-num-seqs 16 $a 2>&1 | grep Throughput)"
  done; done
fi
