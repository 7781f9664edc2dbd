#!/bin/bash
# Prepared for the next GPU session (one H200), first call: the code of session 8 written
# after its last GPU call (kv_write_k<FUSED>, test_cuda_ops' kv_write_rows, cuda_pin's
# available-memory guard) through the CUDA tests; the tests that move KV with the gather
# again under OKV_GATHER_UNROLL=2; bench_step b128 default vs U=2, twice each (is U=2 worth
# the default?); then the 32K samples that budget 2048 got wrong in gpu_run35 (6, 12, 40, 85
# of seed 0) under current, oracle and lookahead at 2048 and current at 4096 (are they
# Quest's misses or the prediction's?). Also the experimental selection stream
# (OKV_SELECT_STREAM=1): its tests, then bench_step with and without it, twice each.
#   bash bench/gpu_run41.sh      (carry build-gc; results under $OUT: logs.tar)
set -u
. bench/gpu_env.sh build-gc
L=/tmp/okv_logs41; mkdir -p $L
save() { tar cf $OUT/logs.tar -C $L .; }
for t in test_cuda_ops test_cuda_engine test_cuda_graph test_cuda_resid test_cuda_tp; do
  timeout 150 build-gc/tests/$t > $L/$t.txt 2>&1; echo "$t: exit $? $(tail -1 $L/$t.txt)" | tee -a $L/summary.txt
done
for t in test_cuda_resid test_cuda_engine; do
  OKV_GATHER_UNROLL=2 timeout 150 build-gc/tests/$t > $L/${t}_u2.txt 2>&1; echo "$t (U=2): exit $? $(tail -1 $L/${t}_u2.txt)" | tee -a $L/summary.txt
done
# the experimental selection stream (OKV_SELECT_STREAM=1, written in session 8, never run)
for t in test_cuda_resid test_cuda_engine test_cuda_graph; do
  OKV_SELECT_STREAM=1 timeout 150 build-gc/tests/$t > $L/${t}_side.txt 2>&1; echo "$t (select stream): exit $? $(tail -1 $L/${t}_side.txt)" | tee -a $L/summary.txt
done
grep -hE "^FAIL" $L/*.txt | head
save
S="-m train/checkpoints/run3/target --device cuda --batch 128 --ctx 28672 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 5"
for u in 4 2 4 2; do
  OKV_GATHER_UNROLL=$u timeout 40 build-gc/bench/bench_step $S > $L/step_u$u.txt 2>&1; echo "U=$u: $(grep '^| 128 |' $L/step_u$u.txt)"
done
S2="-m train/checkpoints/run3/target --device cuda --batch 1,16,128 --ctx 28672 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --steps 20 --warmup 5"
for ss in 0 1 0 1; do
  OKV_SELECT_STREAM=$ss timeout 60 build-gc/bench/bench_step $S2 > $L/step_side$ss.txt 2>&1; echo "select stream $ss:"; grep '^| [0-9]' $L/step_side$ss.txt
done
save
for i in 6 12 40 85; do
  timeout 60 build-gc/oasiskv eval --sweep --task niah_single_text --model train/checkpoints/run3/target --context-len 32768 \
    --num-samples 1 --first-index $i --kv-budget dense,2048,4096 --predict current,oracle,lookahead --kv-cache-factor 2 \
    --kv-sticky 0.25 --seed 0 --device cuda --json $L/inv32k_$i.json > $L/inv32k_$i.txt 2> $L/inv32k_$i.err
  echo "sample $i:"; grep -E "right|wrong" $L/inv32k_$i.err | sed 's/.*ctx 32768 //'
done
save
