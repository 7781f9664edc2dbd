#!/bin/bash
# Planned in session 40 of 2026-12-05 (not run: the device time went to gpu_run178/176/171/177 on an H100, and
# no machine could be had again). (1) JSON mode under load after session 40's host sampling on a pool of threads
# and its faster sampler: SmolLM2's shape with random weights (bench/configs/smollm2-135m --load-format dummy;
# the GGUF in models/ is not carried), 128 chat requests at c64, 300 tokens: plain / JSON with the host pool /
# JSON on the engine thread alone (OKV_HOST_THREADS=1). Before (session 40, H100, the code before the pool):
# plain 14,148 tok/s, JSON 1,516 (38 ms a step), the engine thread 0.06 ms a mask. (2) test_cuda_ops's sampling
# check (the GPU's sampler against okv_sample_u, whose candidate gathering changed; the draws should not).
# (3) The adaptive draft length in generate after the drafter is no longer called on steps that draft none
# (run 16, chain at 16K so that 256 tokens fit, dense; session 40 at 32K: adaptive with the trained draft made 539
# tok/s against plain's 2,714, 65 tokens a run). (4) gpu_run177's serving rows after the per-step gate.
#   bash bench/park_checkpoints.sh keep run16; bash bench/gpu_run179.sh     (carry build-gc)
set -u
. bench/gpu_env.sh build-gc
nvidia-smi --query-gpu=name --format=csv,noheader
M="-m bench/configs/smollm2-135m --load-format dummy --tokenizer tests/data/smollm2"
R=$OUT
OUT=/tmp/ss179 timeout 150 bash bench/structured_serve.sh $B "$M" 64 128 300 "--device cuda" | tee $R/structured.md
OKV_TEST_QUICK=1 timeout 120 $B/tests/test_cuda_ops > $R/test_cuda_ops.txt 2>&1
grep -i "sample" $R/test_cuda_ops.txt | head -8; tail -1 $R/test_cuda_ops.txt
T=${M16:-train/checkpoints/run16}
$B/oasiskv eval --dump-samples /tmp/c.jsonl -m $T/target --task chain --context-len 16384 --num-samples 1 --seed 0 > /dev/null 2>&1
python3 -c "import json;d=json.loads(open('/tmp/c.jsonl').readline());open('/tmp/c.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
for d in model:$T/draft ngram; do
  echo "### chain 16K dense, draft ${d%%:*}"
  timeout 90 bash bench/spec_adaptive.sh $B/oasiskv $T/target $d "--prompt-tokens @/tmp/c.ids" 256 "--device cuda --kv-budget dense"
done | tee $R/spec16k.md
# (4) The adaptive draft length in the server after session 40's per-step gate (overlapped steps where the batch
# drafts none): gpu_run177's rows (run 16, budget 2048 + codes, 4K English prompts, c16 and c64; session 40 before
# the gate: c64 no drafts 38,436 tok/s, adaptive 24,730), in the time left.
UNTIL=$((560 - SECONDS)) bash bench/gpu_run177.sh 2>&1 | tail -12
echo "done at $SECONDS s"
