#!/bin/bash
# Speculative decoding with a fixed number of drafted tokens a step against the adaptive length
# (--spec-adaptive: 1..K a step, from the running acceptance and the measured costs): decode tokens/s,
# drafts a step, acceptance, and how many of the greedy tokens equal plain decoding's (a verify step's
# batched rows may round differently from one row; where two tokens' logits nearly tie, e.g. in the
# text a small model writes after its answer with --ignore-eos, the paths may part).
#   bench/spec_adaptive.sh BIN MODEL DRAFT PROMPT_ARGS [N] [EXTRA_ARGS]
#     DRAFT: ngram | self | model:PATH;  PROMPT_ARGS: e.g. "--prompt-tokens @ids" or "-p TEXT --chat"
# Prints one markdown row a variant: plain, K = 1 / 2 / 4 / 8 fixed, adaptive with K = 8.
set -u
BIN=$1; M=$2; D=$3; P=$4; N=${5:-256}; X=${6:-}
G="-m $M -n $N --temp 0 --ignore-eos --json $X"
echo "| variant | decode tok/s | drafts a step | acceptance | tokens a step | greedy tokens equal to plain's |"
echo "|---|---|---|---|---|---|"
eval "$BIN generate $G $P" > /tmp/sa_plain.json 2>/dev/null || { echo "plain run failed"; exit 1; }
row() {  # label, args
  eval "$BIN generate $G $P $2" > /tmp/sa_v.json 2>/dev/null || { echo "| $1 | failed |"; return; }
  python3 - "$1" <<'PY'
import json, sys
a = json.load(open('/tmp/sa_plain.json')); b = json.load(open('/tmp/sa_v.json'))
s = b['stats']; sp = b.get('spec')
ta, tb = a['tokens'], b['tokens']
same = next((i for i in range(min(len(ta), len(tb))) if ta[i] != tb[i]), min(len(ta), len(tb)))
same = 'all %d' % same if ta == tb else 'first %d of %d' % (same, len(ta))
if sp:
    per = sp['draft_tokens'] / sp['drafts'] if sp['drafts'] else 0
    print('| %s | %.1f | %.2f | %.3f | %.2f | %s |' % (sys.argv[1], s['decode_tokens_per_s'], per, sp['acceptance_rate'],
          sp['mean_acceptance_length'], same))
else:
    print('| %s | %.1f | | | 1 | %s |' % (sys.argv[1], s['decode_tokens_per_s'], same))
PY
}
row plain ""
for k in 1 2 4 8; do row "K = $k" "--draft $D --spec-tokens $k"; done
row "adaptive, K <= 8" "--draft $D --spec-tokens 8 --spec-adaptive"
