#!/bin/bash
# GPU session of 2026-11-30 (8): the host KV tier allocated by populating an anonymous
# mapping in parallel and registering it (cuda_pin.cu) against cudaHostAlloc
# (OKV_HOST_PIN=alloc): cuda_gather --alloc-only at 32 and 64 GiB; the gather rates on the
# registered memory; the CUDA tests that use the host tier.
#   bash bench/gpu_run38.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs38b; mkdir -p $L
for t in test_cuda_ops test_cuda_resid test_cuda_engine; do
  timeout 150 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
grep -hE "^FAIL" $L/*.txt | head
for mb in 32768 65536; do
  timeout 150 build-gc/bench/cuda_gather --alloc-only --host-mb $mb > $L/alloc_reg_$mb.txt 2>&1; echo "registered: $(grep 'host tier of' $L/alloc_reg_$mb.txt | tr '\n' ' ')"
done
OKV_HOST_PIN=alloc timeout 150 build-gc/bench/cuda_gather --alloc-only --host-mb 32768 > $L/alloc_cuda_32768.txt 2>&1
echo "cudaHostAlloc: $(grep 'host tier of' $L/alloc_cuda_32768.txt | tr '\n' ' ')"
timeout 100 build-gc/bench/cuda_gather --calls 40 > $L/gather_reg_512.txt 2>&1; grep "(policy)" $L/gather_reg_512.txt
tar cf $OUT/logs.tar -C $L .
