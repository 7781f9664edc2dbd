#!/bin/bash
# GPU session of 2026-11-29 (9), nvidia-h200-x2.
#  (1) side by side: the accuracy sweep of the trained target (carried in trained/target,
#      from bench/gpu_run8.sh) at 32K on GPU 1, and bench/tp_greedy.sh on both GPUs;
#  (2) serving A/B at TP=2 on a Llama-3-8B shape, 32K-token prompts, 256 output tokens,
#      concurrency 16, dense vs --kv-budget 2048, 16 GiB pool per GPU.
#   bash bench/gpu_run9.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
L=/tmp/okv_logs9; mkdir -p $L
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
( CUDA_VISIBLE_DEVICES=1 timeout ${SWEEP_S:-200} build-gc/oasiskv eval --sweep \
    --task niah_single_text,niah_single_filler,niah_multikey,vt,qa --model train/checkpoints/run3/target --context-len 32768 \
    --num-samples 10 --kv-budget dense,256,512,1024,2048,4096 --predict current,lookahead,oracle --device cuda \
    --json $OUT/sweep32k.json > $L/sweep.txt 2> $L/sweep.err; echo "sweep: exit $?" >> $L/summary.txt ) &
sweeper=$!
ERR=$L/tp_greedy_err.txt timeout 100 bash bench/tp_greedy.sh build-gc tests/data/models/* > $L/tp_greedy.md 2>&1
wait $sweeper
OUT=$L/serve2 CTX=41216 PROMPTS_PER_SLOT=1 timeout ${SERVE_S:-260} bash bench/serve_ab.sh build-gc \
  "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 32768 256 "${CONCS:-16}" 2048 \
  "--device cuda --tensor-parallel-size 2" > $L/serve_8b_tp2.md 2>&1
echo "serve: exit $?" >> $L/summary.txt
pkill -f "oasiskv serve" 2>/dev/null
tar cf $OUT/logs.tar -C $L .
cat $L/summary.txt $L/tp_greedy.md $L/serve_8b_tp2.md $L/serve2/startup.txt 2>/dev/null
for f in $L/serve2/serve_*.log; do echo "== $f"; grep -iE "error|holds|device KV" "$f" | head -3; done
sort $L/tp_greedy_err.txt | uniq -c | head; tail -40 $L/sweep.txt; tail -3 $L/sweep.err
