#!/bin/bash
# GPU session of 2026-12-03 (29), one H200: training run 11, one continuous run of BUDGET seconds
# (default 1540) from scratch across three device calls of at most 10 minutes each. The first call
# starts train/run_gpu.sh in its own process session (setsid: it outlives the call while the machine
# stays held) from copies of the binary and of train/ under /tmp/r11, so that the next calls' tree
# sync cannot touch what it runs; every call returns what it has: a snapshot of both models
# (--snapshots, for a resume if the machine goes back between calls) and the log.
# Recipe (against run 10's): the same models and losses; the curriculum keeps the short contexts
# longer (512 for 20% of the time, 512-2K to 35%, 2K-8K to 42%, 8K/16K to 50%) and its last phase
# keeps 2K batches beside 16K/32K (1:1:4 by steps, so most samples of the phase are 2K ones);
# the families weak at 32K in run 10 (multi-value, multi-query, qa, chain) weigh more.
#   bash bench/gpu_run163.sh start     (call 1; carry build-gc)
#   bash bench/gpu_run163.sh wait      (call 2: until the second snapshot)
#   bash bench/gpu_run163.sh finish    (call 3: until the run ends; target/ and draft.tar under $OUT)
set -u
mode=${1:?usage: gpu_run163.sh start|wait|finish}
. bench/gpu_env.sh build-gc
W=/tmp/r11
B=${R11_BUDGET:-1540}
SNAPS=${R11_SNAPS:-560,1150}
CUR="0:512=1;0.2:512=1,1024=1,2048=1;0.35:2048=1,4096=1,8192=1;0.42:8192=1,16384=1;0.5:2048=1,16384=1,32768=4"
TW="niah_single_text=0.5,niah_single_filler=0.25,niah_multikey=1,niah_multivalue=2,niah_multiquery=1.5,vt=0.75,qa=2,chain=2"
LIMIT=${R11_LIMIT:-585}   # this call returns by then
alive() { pgrep -f "$W/train/train.py" >/dev/null; }
show() { grep -v "^\[.*\] step " "$W/train.log" | tail -n "${1:-60}"; cp "$W/train.log" "$OUT/train.log"; }
case "$mode" in
start)
    rm -rf "$W"; mkdir -p "$W/train"
    cp -a build-gc "$W/bin"
    cp -a train/train.py train/make_texts.py train/run_gpu.sh train/tokenizer "$W/train/"
    export PYTHONUNBUFFERED=1
    OKV_BIN="$W/bin/oasiskv" OKV_TRAIN_ARGS="--workers 14 --report-samples 20 --curriculum $CUR --task-weights $TW --snapshots $SNAPS ${R11_EXTRA:-}" \
        setsid nohup bash "$W/train/run_gpu.sh" "$W/out" "$B" 0 >"$W/train.log" 2>&1 </dev/null &
    snap=${SNAPS%%,*} ;;
wait) snap=${SNAPS##*,} ;;
finish) snap= ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
sleep 5
while [ $SECONDS -lt $LIMIT ] && alive; do
    [ -n "$snap" ] && [ -f "$W/out/snap_$snap/done" ] && break
    sleep 3
done
if [ -n "$snap" ] && [ -f "$W/out/snap_$snap/done" ]; then
    tar -C "$W/out/snap_$snap" -cf "$OUT/snap_$snap.tar" target draft && echo "snapshot snap_$snap returned"
fi
if [ "$mode" = finish ] && [ -f "$W/out/target/model.safetensors" ] && ! alive; then
    mkdir -p "$OUT/target" && cp "$W/out/target/"* "$OUT/target/" && tar -C "$W/out" -cf "$OUT/draft.tar" draft
    ls -la "$OUT/target" "$OUT/draft.tar"
fi
alive && echo "training still running at $SECONDS s of this call" || echo "training process not running"
show 70
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null || true
