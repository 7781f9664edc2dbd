#!/bin/bash
# GPU session of 2026-11-29 (7), nvidia-h200-x2: tensor parallelism over NCCL with one
# rank per GPU. (1) test_cuda_tp (TP=2 over NCCL against TP=1, and ranks sharing a GPU);
# (2) greedy tokens of the reference checkpoints at TP=1, TP=2 (NCCL) and TP=4 (two ranks
# per GPU, host-staged sums), dense and sparse; (3) serving A/B on a Llama-3-8B shape at
# TP=2 with 32K-token prompts, dense vs --kv-budget 2048, 16 GiB pool per GPU; (4) bench_step of that shape at TP=1 and 2.
#   bash bench/gpu_run7.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
nvidia-smi topo -m > $OUT/topo.txt 2>&1
t0=$(date +%s)
timeout 150 build-gc/tests/test_cuda_tp > $OUT/test_cuda_tp.txt 2>&1
echo "test_cuda_tp: exit $? in $(( $(date +%s) - t0 )) s"; grep -E "^--|checks|FAIL" $OUT/test_cuda_tp.txt | head -20
timeout 90 bash bench/tp_greedy.sh build-gc tests/data/models/* | tee $OUT/tp_greedy.md
t0=$(date +%s)
python3 bench/pad_tokenizer.py tests/data/tok_llama3/tokenizer.json 128256 /tmp/okv_tok8b > /dev/null
CTX=41216 PROMPTS_PER_SLOT=1 timeout ${T:-270} bash bench/serve_ab.sh build-gc \
  "-m bench/configs/llama3-8b --load-format dummy --tokenizer /tmp/okv_tok8b/tokenizer.json" 16 32768 128 "${CONCS:-8 32}" 2048 \
  "--device cuda --tensor-parallel-size 2" | tee $OUT/serve_8b_tp2.md
echo "serve: $(( $(date +%s) - t0 )) s"
for f in $OUT/serve_*.log; do echo "== $f"; grep -iE "error|holds|device KV|warn" "$f" | head -3; done
# the decode step of the 8B shape at TP=1 and TP=2 (random KV; section 4's command)
for tp in 2 1; do
  timeout 45 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --tp $tp --batch 1,16,64 --ctx 8192,32768 \
    --kv-budget dense,2048 --steps 5 --warmup 2 > $OUT/step_tp$tp.md 2>&1; echo "bench_step tp$tp: exit $?"; cat $OUT/step_tp$tp.md
done
