#!/bin/bash
# GPU session of 2026-11-30 (8), call 2: the small-batch GEMV path and the run fusions
# (cuda_gemv.cu; q/k/v in one launch, projection + residual, gate/up + SwiGLU; one bf16
# conversion per input on the cuBLAS path). Tests (test_cuda_ops has the fusion cases;
# test_cuda_graph checks graphs on == off bit for bit, which now means fused == separate),
# then bench_step with OKV_GEMV_ROWS=0 (the cuBLAS path, fusions of conversions only) vs
# the default 4 on the SmolLM2 shape (dummy weights), the trained target and the 8B shape;
# then, where the image has Nsight Systems, a profile of the SmolLM2-shape step at batch 1.
#   bash bench/gpu_run34.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs34; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
echo "nsys: $(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)"
for t in test_cuda_ops test_cuda_graph test_cuda_engine test_cuda_resid; do
  timeout 150 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -hE "^FAIL" $L/*.txt | head
grep -h "fused ops" $L/test_cuda_ops.txt | head -4
save
S="--cache-factor 2 --sticky 0.25 --steps 20 --warmup 5"
for gr in 0 4; do
  OKV_GEMV_ROWS=$gr timeout 90 build-gc/bench/bench_step --config bench/configs/smollm2-135m --device cuda --batch 1,4,16 \
    --ctx 8192 --kv-budget dense,2048 $S > $L/step_smol_gemv$gr.txt 2>&1
  OKV_GEMV_ROWS=$gr timeout 90 build-gc/bench/bench_step -m train/checkpoints/run3/target --device cuda --batch 1,4,16 \
    --ctx 28672 --kv-budget dense,2048 $S > $L/step_trained_gemv$gr.txt 2>&1
  OKV_GEMV_ROWS=$gr timeout 120 build-gc/bench/bench_step --config bench/configs/llama3-8b --device cuda --batch 1,4 \
    --ctx 8192 --kv-budget dense,2048 $S > $L/step_8b_gemv$gr.txt 2>&1
  for f in smol trained 8b; do echo "== $f OKV_GEMV_ROWS=$gr"; grep "^| [0-9]" $L/step_${f}_gemv$gr.txt; done
  save
done
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  for kv in dense 2048; do
    timeout 120 $NSYS profile -o $L/nsys_smol_$kv --force-overwrite true -t cuda build-gc/bench/bench_step --config bench/configs/smollm2-135m \
      --device cuda --batch 1 --ctx 8192 --kv-budget $kv $S > $L/nsys_run_$kv.txt 2>&1
    timeout 120 $NSYS stats -r cuda_api_sum,cuda_gpu_kern_sum $L/nsys_smol_$kv.nsys-rep > $L/nsys_stats_$kv.txt 2>&1
    head -45 $L/nsys_stats_$kv.txt
    rm -f $L/nsys_smol_$kv.nsys-rep $L/nsys_smol_$kv.sqlite
  done
fi
save
