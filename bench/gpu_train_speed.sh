#!/bin/bash
# Where a training step's time goes on the H200, and what two changes buy (planned in session 31, not yet
# run). Run 13's log shows ~740K tokens/s (both models) in the 512-2K phases and 540K at 2K/16K/32K: a
# 7.3M target at 512 tokens should be far from bound by its arithmetic (~6 x 7.3M x 65K = 2.9 TFLOP a
# step, ~5 ms at 600 TFLOP/s, against ~88 ms measured), so the short phases, half of the schedule, are
# bound by something else (launches, elementwise kernels, the loss's fp32 logits, Python).
# For each context (512, 2K, 32K), 40 steps of one phase (--steps, --curriculum 0:CTX) with
#   base       today's train.py
#   gqa        --sdpa-gqa (SDPA reads the KV heads for their query groups; no repeat_interleave copies)
#   compile    --compile (torch.compile of each model's forward, dynamic shapes)
# and the torch profiler's tables over steps 30-34 of `base` (OKV_PROFILE_STEPS). Each line "steady:"
# gives ms a step and tokens/s over the second half of the steps. ~5 minutes. If the GPU side gets faster,
# the sample makers may bind next: a dump call of the manuals' texts costs ~0.55 s to start (reading 9.5 MB
# and sorting its words; perf: strcmp, malloc and free of every word) before ~1.5 ms a 512-token sample, so
# at 512 a chunk of 256 takes ~0.7 s of one of the 14 workers (Sampler.ch: larger chunks, or a word set
# built without a malloc a word, if the profile shows steps waiting on samples).
#   bash bench/gpu_train_speed.sh     (carry build-gc and build-texts, as bench/gpu_run168.sh)
set -u
. bench/gpu_env.sh build-gc
export PYTHONUNBUFFERED=1
TX=/tmp/okv_texts13
mkdir -p $TX && tar -C $TX -xJf build-texts/okv_texts.tar.xz || { echo "no build-texts/okv_texts.tar.xz"; exit 2; }
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
for ctx in 512 2048 32768; do
  for v in base gqa compile; do
    case $v in base) X="" ;; gqa) X="--sdpa-gqa" ;; compile) X="--compile" ;; esac
    P=""; [ $v = base ] && P="30:35"
    echo "== ctx $ctx $v"
    OKV_PROFILE_STEPS=$P timeout 240 python3 train/train.py --out /tmp/sp --bin build-gc/oasiskv --texts $TX --steps 40 \
      --curriculum "0:$ctx" --copy-threshold 0 --report-ctx 512 --report-samples 1 --eval-texts off --workers 14 $X \
      > /tmp/speed.log 2>&1
    { echo "== ctx $ctx $v"; cat /tmp/speed.log; } >> $OUT/speed.log   # one file: at most 8 come back
    grep "steady\|Error\|error" /tmp/speed.log | tail -3
  done
done
