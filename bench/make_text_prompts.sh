#!/bin/bash
# English-text prompts for `oasiskv bench serve --dataset`: niah_single_text samples from
# `oasiskv eval --dump-samples --dump-text` (held-out license texts with one needle), one
# JSON line {"prompt": ...} each.
#   bench/make_text_prompts.sh OASISKV_BIN MODEL CONTEXT_TOKENS N OUT.jsonl   (seed 7)
set -eu
BIN=$1; MODEL=$2; CTX=$3; N=$4; OUTF=$5
"$BIN" eval --task niah_single_text -m "$MODEL" --context-len "$CTX" --num-samples "$N" --seed 7 \
  --dump-samples "$OUTF.samples" --dump-text 2>/dev/null
python3 - "$OUTF.samples" "$OUTF" <<'PY'
import json, sys
with open(sys.argv[2], 'w') as f:
    for line in open(sys.argv[1]):
        f.write(json.dumps({'prompt': json.loads(line)['prompt']}) + '\n')
PY
rm -f "$OUTF.samples"
wc -l < "$OUTF"
