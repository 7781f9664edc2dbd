#!/bin/bash
# GPU session of 2026-11-29 (8), nvidia-h200-x2: two jobs side by side.
#  GPU 1: the evaluation models' training run (train/run_gpu.sh, 500 s, seed 0).
#  GPU 0: serving A/B on a Llama-3-8B shape on one GPU, 32K-token prompts, 256 output
#         tokens, dense vs --kv-budget 2048 behind the same 16 GiB pool.
#   bash bench/gpu_run8.sh      (carry build-gc; results under $OUT: logs.tar, target.tar, draft.tar)
set -u
. bench/gpu_env.sh build-gc
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L=/tmp/okv_logs; mkdir -p $L
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
( CUDA_VISIBLE_DEVICES=1 OKV_TRAIN_ARGS="--workers 20" OKV_BIN=build-gc/oasiskv timeout 540 train/run_gpu.sh /tmp/tr ${TRAIN_S:-500} 0 \
    > $L/train.log 2>&1; echo "train: exit $?" >> $L/summary.txt ) &
trainer=$!
CUDA_VISIBLE_DEVICES=0 OUT=$L/serve1 CTX=41216 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-430} bash bench/serve_ab.sh build-gc \
  "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 32768 256 "${CONCS:-16}" 2048 \
  "--device cuda" > $L/serve_8b_1gpu.md 2>&1
echo "serve: exit $?" >> $L/summary.txt
pkill -f "oasiskv serve" 2>/dev/null
wait $trainer
(cd /tmp/tr 2>/dev/null && tar cf $OUT/target.tar target && tar cf $OUT/draft.tar draft)
tar cf $OUT/logs.tar -C $L .
cat $L/summary.txt $L/serve_8b_1gpu.md $L/serve1/startup.txt 2>/dev/null
for f in $L/serve1/serve_*.log; do echo "== $f"; grep -iE "error|holds|device KV" "$f" | head -3; done
grep -vE "^\[ *[0-9.]+s\] step" $L/train.log | tail -c 4000
echo ====; grep -E "^\[ *[0-9.]+s\] step" $L/train.log | awk 'NR % 6 == 0' | tail -12
