#!/bin/bash
# GPU session of 2026-11-30 (13), one H200: prefill warps of 32 vectors, now the default:
# head_dim 64 shapes (trained target 4,2,64; SmolLM2 9,3,64) against warps of 16; the
# 8B-shaped 2 x 32K prefill by chunk size; an Nsight Compute look at the kernel; the CUDA tests.
#   bash bench/gpu_run70.sh      (carry build-gc; results under $OUT)
. bench/gpu_env.sh build-gc
for sh in 4,2,64 9,3,64; do
  for w in 16 32; do
    echo "== shape $sh warp rows $w"
    OKV_PREFILL_WARP_ROWS=$w timeout 60 build-gc/bench/cuda_attention --prefill 2048 --ctx 8192,32768 --shape $sh 2>&1 | grep "kernel"
  done
done
T8B="-m bench/configs/llama3-8b --load-format dummy --device cuda --num-prompts 2 --input-len 32768 --output-len 1 --kv-pool-gb 20"
for mb in 2048 4096 8192; do
  echo "prefill 8B 2x32K, default kernel, --max-num-batched-tokens $mb: $(timeout 90 build-gc/oasiskv bench throughput $T8B --max-num-batched-tokens $mb 2>&1 | grep -E 'Throughput|rror' | head -2)"
done
echo "prefill 8B 2x32K, warps of 16, 2048: $(OKV_PREFILL_WARP_ROWS=16 timeout 90 build-gc/oasiskv bench throughput $T8B --max-num-batched-tokens 2048 2>&1 | grep -E 'Throughput|rror' | head -2)"
for t in engine graph resid; do
  timeout 150 build-gc/tests/test_cuda_$t > $OUT/$t.txt 2>&1; echo "$t exit $? $(grep -E 'checks' $OUT/$t.txt | tail -1)"
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$NCU" ]; then
  timeout 150 $NCU --kernel-name regex:pf_attn_k -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    build-gc/bench/cuda_attention --prefill 2048 --ctx 32768 > $OUT/ncu_prefill.txt 2>&1
  grep -E "Duration|Throughput|Pipe|Stall|Occupancy|Registers|Issue|Shared|Bank|Executed Ipc|pipe" $OUT/ncu_prefill.txt | head -60
fi
