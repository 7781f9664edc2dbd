#!/bin/bash
# SmolLM2-135M-Instruct (models/SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB) on the GPU machine.
# A call carries at most 64 MiB with the tree (29 MiB), so the file travels in NPARTS parts
# (default 4, 23.5 MiB each), one call each, while the machine stays warm (ignored paths already
# there are kept between calls); the last call joins them, checks the sha256 the reference was made
# with, and runs test_cuda_engine (which then compares SmolLM2 on CUDA against the CPU engine) and
# bench_step on the real model. BUILD names the carried CUDA build (default build-gc).
#   here:            bash bench/gpu_smollm2.sh split
#   device, call 1: carry ["build-gc", "out/smol/p0"] (~60 MiB with the tree), command:
#                   bash bench/gpu_smollm2.sh have (and any other run script of build-gc)
#   device, calls 2..: carry ["out/smol/p1"] .. ["out/smol/p3"], command: bash bench/gpu_smollm2.sh have;
#                   the last one: bash bench/gpu_smollm2.sh run (build-gc stays from call 1)
#   then, while warm: CONCS="1 16" bash bench/gpu_smollm2.sh serve (and CONCS="64 256" in another call)
set -u
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
B=${BUILD:-build-gc}
NP=${NPARTS:-4}
case "${1:-}" in
split)
  mkdir -p out/smol && rm -f out/smol/p*
  sz=$(stat -c %s $M); part=$(( (sz + NP - 1) / NP ))
  for i in $(seq 0 $((NP - 1))); do dd if=$M of=out/smol/p$i bs=$part skip=$i count=1 status=none; done
  ls -la out/smol ;;
have)
  ls -la out/smol ;;
run)
  . bench/gpu_env.sh $B
  L=/tmp/okv_logs_smol; mkdir -p $L models
  cat $(ls out/smol/p* | sort -V) > $M
  want=$(python3 -c "import json; print(json.load(open('tests/data/smollm2_greedy.json'))['gguf_sha256'])")
  got=$(sha256sum $M | cut -d' ' -f1)
  [ "$want" = "$got" ] || { echo "parts do not join to the reference file ($got, want $want)"; exit 1; }
  timeout 200 $B/tests/test_cuda_engine > $L/test_cuda_engine.txt 2>&1
  echo "test_cuda_engine: exit $? $(tail -1 $L/test_cuda_engine.txt)"
  grep -E "SmolLM2|^FAIL" $L/test_cuda_engine.txt
  timeout 150 $B/bench/bench_step -m $M --device cuda --batch 1,16,64 --ctx 8192 --kv-budget dense,2048 \
    --cache-factor 2 --sticky 0.25 --steps 10 --warmup 3 > $L/step_smollm2.txt 2>&1
  grep "^| " $L/step_smollm2.txt
  tar cf $OUT/logs.tar -C $L . ;;
serve)
  # after run (the joined model stays on the warm machine): serving English text, ~7K-token
  # prompts (niah_single_text samples), 512 output tokens, 4 GiB pool, dense vs budget 2048,
  # serve defaults; CONCS picks the concurrencies of this call
  . bench/gpu_env.sh $B
  L=/tmp/okv_logs_smol; mkdir -p $L
  [ -f $M ] || { echo "no $M: run 'run' first on this machine"; exit 1; }
  [ -f /tmp/smol_prompts.jsonl ] || bash bench/make_text_prompts.sh $B/oasiskv $M 7168 256 /tmp/smol_prompts.jsonl
  TAG=smol KVS="dense 2048" PORT0=26000 DATASET=/tmp/smol_prompts.jsonl OUT=$L/serve CTX=8192 PROMPTS_PER_SLOT=${PPS:-1} \
    timeout ${SERVE_S:-540} bash bench/serve_ab.sh $B "-m $M" 4 7168 512 "${CONCS:-1 16 64 256}" 2048 \
    "--device cuda" >> $L/serve_smol.md 2>&1
  cat $L/serve_smol.md
  tar cf $OUT/logs.tar -C $L . ;;
*) echo "usage: $0 split|have|run|serve"; exit 2 ;;
esac
