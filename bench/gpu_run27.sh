#!/bin/bash
# GPU session of 2026-11-29 (7), one H200: segment graphs (cuda_graph.cu). (1) test_cuda_graph
# (graphs on vs off: bitwise-equal logits, graphs captured and launched) and the other CUDA
# tests with graphs on by default; (2) bench_step with OKV_CUDA_GRAPHS=0 and 1: the trained
# target at 28K, batch 1 / 16 / 128, dense and budget 2048 (cache factor 2, sticky 0.25), and
# the Llama-3-8B shape (random weights) at 8K, batch 1 / 16, dense.
#   bash bench/gpu_run27.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs27; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_graph test_cuda_engine test_cuda_tp test_cuda_ops test_cuda_resid; do
  timeout 150 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -hE "^FAIL|^  (llama|qwen)" $L/*.txt | head -30
save
for g in 0 1; do
  OKV_CUDA_GRAPHS=$g timeout 100 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 1,16,128 \
    --ctx 28672 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --steps 10 --warmup 3 > $L/step_trained_g$g.txt 2>&1
  echo "== graphs $g"; grep "^| [0-9]" $L/step_trained_g$g.txt
  save
done
for g in 0 1; do
  OKV_CUDA_GRAPHS=$g timeout 110 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 1,16 \
    --ctx 8192 --kv-budget dense --steps 10 --warmup 3 > $L/step_8b_g$g.txt 2>&1
  echo "== 8B graphs $g"; grep "^| [0-9]" $L/step_8b_g$g.txt
  save
done
