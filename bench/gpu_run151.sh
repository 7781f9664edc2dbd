#!/bin/bash
# (OKV_GEMV_PIPE, measured here, was removed later in session 25: it never won.)
# Session 25 of 2026-12-02: the GEMV's variants (columns a warp 2/4, chunks in flight 4/8, the
# next chunks loaded early, PDL) on the Llama-3-8B shapes alone (bench/cuda_gemv.c), then the
# decode step (bench_step) with the baseline and the two best variants at batch 1, alternated;
# the CUDA tests with the best variant. gpu_run150 came first (its baseline table was lost to
# the output's tail: every table goes to $OUT here).
#   bash bench/gpu_run151.sh      (carry build-gc; results under $OUT)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
END=${END:-570}
mkdir -p $OUT/gemv
i=0
for pdl in 0 1; do
  for v in "2 4 0" "2 4 1" "2 8 0" "2 8 1" "4 4 0" "4 4 1" "4 8 0"; do
    set -- $v; tag="c$1u$2p$3d$pdl"
    OKV_GEMV_COLS=$1 OKV_GEMV_UNROLL=$2 OKV_GEMV_PIPE=$3 OKV_PDL=$pdl timeout 60 $B/bench/cuda_gemv --shapes 8b --rows 1,4 > $OUT/gemv/$tag.md 2>&1
  done
done
# per variant: the 8B layer's four projections (us, graphs), rows 1 and 4
python3 - $OUT/gemv > $OUT/gemv_summary.txt <<'PY'
import sys, os, glob
res = []
for f in sorted(glob.glob(sys.argv[1] + "/*.md")):
    t = {}
    for l in open(f):
        c = [x.strip() for x in l.split("|")]
        if len(c) > 10 and c[1] == "8b":
            t[(c[2], int(c[5]))] = float(c[9])
    if not t: print(os.path.basename(f), "no rows"); continue
    layer = {r: sum(t.get((p, r), 1e9) for p in ("qkv", "o", "gate+up", "down")) for r in (1, 4)}
    res.append((layer[1], layer[4], os.path.basename(f)[:-3], t))
res.sort()
for l1, l4, tag, t in res:
    print(f"{tag}: layer us rows1 {l1:.1f} rows4 {l4:.1f} | " + " ".join(f"{p}:{t.get((p,1),0):.1f}/{t.get((p,4),0):.1f}" for p in ("qkv","o","gate+up","down","lm_head")))
PY
cat $OUT/gemv_summary.txt
best=$(head -2 $OUT/gemv_summary.txt | cut -d: -f1 | tr '\n' ' ')
echo "best: $best (at $SECONDS s)"
envof() { local t=$1; echo "OKV_GEMV_COLS=${t:1:1} OKV_GEMV_UNROLL=${t:3:1} OKV_GEMV_PIPE=${t:5:1} OKV_PDL=${t:7:1}"; }
S8="--config bench/configs/llama3-8b --device cuda --steps 30 --warmup 5 --batch 1,4 --ctx 8192 --kv-budget dense,2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8"
for round in 1 2; do
  for t in c2u4p0d0 $best; do
    [ $SECONDS -lt $((END - 110)) ] || { echo "skipped step $t: no time"; continue; }
    echo "-- 8b $t"; env $(envof $t) timeout 70 $B/bench/bench_step $S8 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-8 | tee -a $OUT/step.md
  done
done
t=${best%% *}
echo "== tests with $t"
for x in test_cuda_ops test_cuda_graph test_cuda_engine; do
  [ $SECONDS -lt $((END - 40)) ] || { echo "skipped $x: no time"; continue; }
  s0=$SECONDS; env $(envof $t) timeout 100 $B/tests/$x > $OUT/$x.txt 2>&1; rc=$?
  echo "$x rc $rc ($((SECONDS - s0)) s): $(tail -n 1 $OUT/$x.txt)"
done
echo "done at $SECONDS s"
