#!/usr/bin/env bash
# label: model
# oasiskv eval end to end on SmolLM2-135M-Instruct at a small context: a budget that covers
# the context (run, not reused) answers exactly as dense; the same seed gives the same
# table; samples are deterministic; bad input gives one message and exit code 1.
set -uo pipefail
cli="$OKV_CLI"
model="$OKV_SOURCE_DIR/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
  echo "skipped: $model is missing (scripts/fetch_model.sh fetches it)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
py() { python3 -c "$@"; }

# samples: same seed, same bytes; another seed, other bytes
"$cli" eval -m "$model" --task vt --context-len 512 --num-samples 2 --seed 3 --print-samples > "$tmp/s1" 2>/dev/null || bad "print-samples"
"$cli" eval -m "$model" --task vt --context-len 512 --num-samples 2 --seed 3 --print-samples > "$tmp/s2" 2>/dev/null
"$cli" eval -m "$model" --task vt --context-len 512 --num-samples 2 --seed 4 --print-samples > "$tmp/s3" 2>/dev/null
if cmp -s "$tmp/s1" "$tmp/s2"; then ok; else bad "samples differ for one seed"; fi
if ! cmp -s "$tmp/s1" "$tmp/s3"; then ok; else bad "seeds 3 and 4 give the same samples"; fi

# dense, and a 1024-token budget over a 384-token context actually run: identical answers
common=(-m "$model" --task niah_single_filler --context-len 384 --num-samples 2 --seed 1 --threads 2)
if timeout 300 "$cli" eval "${common[@]}" --sweep --kv-budget dense,1024 --predict current,lookahead --no-reuse \
     --json "$tmp/a.json" > "$tmp/a.md" 2> "$tmp/a.err"; then ok; else bad "sweep: $(tail -3 "$tmp/a.err")"; fi
if py "
import json, sys
d = json.load(open('$tmp/a.json'))
rows = d['rows']
assert len(rows) == 3, rows
dense = rows[0]
assert dense['kv_budget'] == 0 and dense['n'] == 2
for r in rows[1:]:
    assert not r['copied_from_dense'], r
    assert r['same_as_dense'] == 2, r
    assert r['correct'] == dense['correct'] and abs(r['partial'] - dense['partial']) < 1e-9, (r, dense)
"; then ok; else bad "full budget differs from dense: $(cat "$tmp/a.md")"; fi
# the sweep's JSON holds every sample's answer, each tied to its row; the full budget's equal dense's
if py "
import json
d = json.load(open('$tmp/a.json'))
rows, smp = d['rows'], d['samples']
assert len(smp) == 6, smp
out = {}
for s in smp:
    r = rows[s['row']]
    assert (s['task'], s['context_len'], s['kv_budget']) == (r['task'], r['context_len'], r['kv_budget']), (s, r)
    assert s['predict'] == r['predict'] and s['answers'] and s['prompt_tokens'] > 0, s
    out[(s['row'], s['index'])] = (s['output'], s['correct'])
assert sorted(out) == [(r, i) for r in range(3) for i in range(2)], sorted(out)
for r in (1, 2):
    for i in range(2):
        assert out[(r, i)] == out[(0, i)], (r, i, out)
assert sum(out[(0, i)][1] for i in range(2)) == rows[0]['correct']
"; then ok; else bad "sweep per-sample records: $(head -c 2000 "$tmp/a.json")"; fi
if grep -q "| niah_single_filler | 384 | dense |" "$tmp/a.md"; then ok; else bad "markdown table: $(cat "$tmp/a.md")"; fi

# single run with per-sample records; the same seed again: the same outputs (lookahead's own n-gram
# drafts, 3 a step: --spec-tokens counts them without --draft)
for i in 1 2; do
  timeout 300 "$cli" eval "${common[@]}" --kv-budget 128 --predict lookahead --spec-tokens 3 --json "$tmp/s$i.json" \
    > /dev/null 2> "$tmp/s$i.err" || bad "sparse run $i: $(tail -3 "$tmp/s$i.err")"
done
if py "
import json
a = json.load(open('$tmp/s1.json')); b = json.load(open('$tmp/s2.json'))
assert len(a['samples']) == 2 and a['rows'][0]['kv_budget'] == 128
assert [s['output'] for s in a['samples']] == [s['output'] for s in b['samples']]
assert a['rows'][0]['correct'] == b['rows'][0]['correct']
"; then ok; else bad "sparse runs are not deterministic"; fi

# regression: drafted rows (n-gram drafts copy the repetitive filler) must not crowd
# the real token's blocks out of a lookahead selection (0/2 before the fix, 2/2 now)
for m in current lookahead; do
  timeout 300 "$cli" eval -m "$model" --task niah_single_filler --context-len 768 --num-samples 2 --kv-budget 512 \
    --predict $m --draft ngram --json "$tmp/la_$m.json" > /dev/null 2>&1 || bad "niah lookahead run ($m)"
done
if py "
import json
c = json.load(open('$tmp/la_current.json'))['rows'][0]['correct']
l = json.load(open('$tmp/la_lookahead.json'))['rows'][0]['correct']
assert c == 2 and l == 2, (c, l)
"; then ok; else bad "lookahead with drafts loses the needle that current finds"; fi

# an FP8 E4M3 host tier (--kv-host-dtype fp8): the same needles found as with the float tier, in a
# quarter of its fetched bytes (the CPU backend's host tier is float32)
timeout 300 "$cli" eval -m "$model" --task niah_single_filler --context-len 768 --num-samples 2 --kv-budget 512 \
  --predict current --draft ngram --kv-host-dtype fp8 --json "$tmp/la_fp8.json" > /dev/null 2>&1 || bad "niah run with an fp8 host tier"
if py "
import json
c = json.load(open('$tmp/la_current.json'))['rows'][0]
f = json.load(open('$tmp/la_fp8.json'))['rows'][0]
assert f['host_kv'] == 'fp8' and c['host_kv'] == 'auto', (f, c)
assert f['correct'] == c['correct'] == 2, (f, c)
assert f['fetch_bytes'] > 0 and abs(f['fetch_bytes'] * 4 - c['fetch_bytes']) <= 0.25 * c['fetch_bytes'], (f, c)
"; then ok; else bad "fp8 host tier: $(cat "$tmp/la_fp8.json")"; fi

# bad input: one message, exit code 1
expect_error() {
  local what="$1" pat="$2"; shift 2
  local err rc
  err="$(timeout 60 "$@" 2>&1 >/dev/null)"; rc=$?
  if [ $rc -ne 1 ]; then bad "$what: exit $rc (want 1): $err"; return; fi
  if ! grep -qiE -e "$pat" <<<"$err"; then bad "$what: '$err' lacks /$pat/"; return; fi
  ok
}
expect_error "no task" "--task" "$cli" eval -m "$model"
expect_error "unknown task" "unknown task" "$cli" eval -m "$model" --task nope
expect_error "lists need --sweep" "sweep" "$cli" eval -m "$model" --task vt --kv-budget 256,512
expect_error "bad predict" "predict" "$cli" eval -m "$model" --task vt --predict sideways
expect_error "context too long" "context length" "$cli" eval -m "$model" --task vt --context-len 100000
expect_error "key codes of 3 bits" "1, 2 or 4" "$cli" eval -m "$model" --task vt --context-len 512 --num-samples 1 --kv-budget 256 --kv-key-codes 3
expect_error "bad host KV type" "not a host KV type" "$cli" eval -m "$model" --task vt --kv-host-dtype fp4
expect_error "adaptive drafts without drafts" "needs --draft" "$cli" eval -m "$model" --task vt --predict current --spec-adaptive
expect_error "fidelity's drafts are fixed" "do not apply" "$cli" eval -m "$model" --task fidelity --predict lookahead --spec-adaptive
expect_error "context too short" "needs more than" "$cli" eval -m "$model" --task cwe --context-len 64 --kv-budget dense
expect_error "--spec-tokens without drafts" "needs --draft" "$cli" eval -m "$model" --task vt --predict current --spec-tokens 2
# (the whole help first: grep -q leaving early would break the pipe under pipefail)
help_out=$("$cli" eval --help)
if grep -q "niah_multikey" <<< "$help_out"; then ok; else bad "--help lists the tasks"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
