#!/bin/bash
# Session 28 of 2026-12-03. (1) Decode on real prompts, run 10 at 32K (chain sample 0 and multi-query
# sample 0, 256 tokens, greedy, budget 2048, 2-bit codes, serve defaults): `current`, `layer-ahead`,
# layer-ahead with the step-ahead prefetch (OKV_LA_PREFETCH=1), and with a sticky share (OKV_LA_STICKY=1): decode tok/s, fetched bytes,
# resident in time, stall. (2) The 8B-shaped step, layer-ahead plain, with the prefetch, sticky (random
# weights: the step-ahead prediction is no help there, so this shows its cost alone). (3) The matrix
# cells ACCURACY.md lacks: `layer-ahead` (F) and `lookahead` (E) at 256 and 4096, the oracle's (D) 256
# and 4096 on three families; in the order D, E, F while time lasts (END, default 500 s).
#   bash bench/gpu_run162.sh      (carry build-gc, made with bench/make_carry.sh)
set -u
. bench/gpu_env.sh build-gc
B=build-gc
M=train/checkpoints/run10
END=${END:-500}
timeout 60 $B/tests/test_cuda_engine > $OUT/test_cuda_engine.txt 2>&1; echo "test_cuda_engine rc $?: $(tail -n 1 $OUT/test_cuda_engine.txt)"
G="--kv-budget 2048 --kv-key-codes 2 --kv-cache-factor 2 --kv-sticky 0.25 --device cuda -n 256 --temp 0 --ignore-eos --json"
for t in chain niah_multiquery; do
  $B/oasiskv eval --dump-samples /tmp/$t.jsonl -m $M/target --task $t --context-len 32768 --num-samples 1 --seed 0 > /dev/null 2>&1
  python3 -c "import json;d=json.loads(open('/tmp/$t.jsonl').readline());open('/tmp/$t.ids','w').write(' '.join(map(str,d['prompt_tokens'])))"
  for v in current:0:0 layer-ahead:0:0 layer-ahead:1:0 layer-ahead:0:1; do
    pf=${v#*:}; OKV_LA_STICKY=${pf#*:} OKV_LA_PREFETCH=${pf%:*} timeout 60 $B/oasiskv generate -m $M/target --prompt-tokens @/tmp/$t.ids $G --predict ${v%%:*} 2>/dev/null > /tmp/g.json
    python3 -c "
import json;d=json.load(open('/tmp/g.json'));s=d['stats'];k=s['kv']
print('$t ${v%%:*} prefetch:sticky ${v#*:}: decode %.1f tok/s, fetched %.1f MB, in time %.4f, stall %.2f ms, tokens %s' % (s['decode_tokens_per_s'], k['fetch_bytes']/1e6, k['resident_in_time'], k['stall_ms'], hash(tuple(d['tokens']))%100000))"
  done
done
S="--config bench/configs/llama3-8b --device cuda --steps 20 --warmup 5 --batch 1,4,16 --ctx 8192,32768 --kv-budget 2048 --cache-factor 2 --sticky 0.25 --kv-host-dtype fp8 --predict layer-ahead"
for v in 0:0 1:0 0:1; do
  OKV_LA_PREFETCH=${v%:*} OKV_LA_STICKY=${v#*:} timeout 100 $B/bench/bench_step $S 2>&1 | grep -E "^\| [0-9]|rror" | cut -d'|' -f1-11 | sed "s/^/LA prefetch:sticky $v /" | tee -a $OUT/step.md
done
E="$B/oasiskv eval --sweep --model $M/target --context-len 32768 --num-samples 40 --kv-cache-factor 2 --kv-sticky 0.25 --seed 0 --device cuda --kv-key-codes 2"
mkdir -p $OUT/m
run() { local left=$((END - SECONDS)); [ $left -gt 25 ] || { echo "skipped $1: no time"; return; }
  timeout $left $E --json $OUT/m/$1.json "${@:2}" 2>&1 | grep "^| [a-z]" | sed "s/^/$1 /"; }
T="niah_single_text niah_multikey vt qa chain niah_multiquery niah_multivalue"
for t in niah_single_text qa niah_multivalue; do run D_$t --task $t --kv-budget 256,4096 --predict oracle; done
for t in $T; do run E_$t --task $t --kv-budget 256,4096 --predict lookahead --draft model:$M/draft --spec-tokens 3; done
# F as the 512-2048 cells of gpu_run160 were run: without layer-ahead's sticky share (the default since)
export OKV_LA_STICKY=0
for t in $T; do run F_$t --task $t --kv-budget 256,4096 --predict layer-ahead; done
tar -C $OUT -czf $OUT/matrix.tgz m && rm -rf $OUT/m
echo "done at $SECONDS s"
