#!/usr/bin/env bash
# label: model
# Speculative decoding through the CLI on the real default model (SmolLM2-135M):
# greedy with --draft ngram / self gives exactly the tokens of plain greedy (also
# when the output ends on end-of-generation, a stop string or max_tokens, and with
# the adaptive draft length), the
# JSON carries the "spec" statistics, and bad --draft / --spec-tokens values fail
# with one clear message.
set -uo pipefail
cli="${OKV_CLI:?OKV_CLI not set}"
src="${OKV_SOURCE_DIR:?OKV_SOURCE_DIR not set}"
model="$src/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
    echo "SKIP: $model is absent"
    exit 77
fi
py="$(command -v python3)" || { echo "SKIP: no python3 to read the JSON"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# same_as_plain "what" "draft [--spec-tokens K]" args...: plain greedy vs speculative greedy
same_as_plain() {
    local what="$1" draft="$2"
    shift 2
    if ! timeout 300 "$cli" generate -m "$model" --temp 0 --json "$@" > "$tmp/plain.json" 2> "$tmp/err"; then
        bad "$what: plain run failed: $(cat "$tmp/err")"; return
    fi
    if ! timeout 300 "$cli" generate -m "$model" --temp 0 --json --draft $draft "$@" > "$tmp/spec.json" 2> "$tmp/err"; then
        bad "$what: --draft $draft run failed: $(cat "$tmp/err")"; return
    fi
    local msg
    msg="$("$py" - "$tmp/plain.json" "$tmp/spec.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
errs = []
if a["tokens"] != b["tokens"]:
    n = next((i for i, (x, y) in enumerate(zip(a["tokens"], b["tokens"])) if x != y), min(len(a["tokens"]), len(b["tokens"])))
    errs.append("tokens differ from position %d (%d vs %d tokens)" % (n, len(a["tokens"]), len(b["tokens"])))
if a["text"] != b["text"] or a["finish_reason"] != b["finish_reason"]:
    errs.append("text or finish_reason differ")
if "spec" in a:
    errs.append("plain output has a spec field")
s = b.get("spec")
if not isinstance(s, dict):
    errs.append("no spec field")
else:
    keys = ["drafts", "draft_tokens", "accepted_tokens", "acceptance_rate", "mean_acceptance_length"]
    if any(k not in s for k in keys):
        errs.append("spec lacks one of %s: %s" % (keys, s))
    elif not (0 <= s["accepted_tokens"] <= s["draft_tokens"] and s["drafts"] <= s["draft_tokens"]
              and 0 <= s["acceptance_rate"] <= 1 and s["mean_acceptance_length"] >= 1):
        errs.append("inconsistent spec stats %s" % s)
print("; ".join(errs) if errs else "ok %d tokens, finish %s, spec %s" % (len(b["tokens"]), b["finish_reason"], json.dumps(s)))
PY
)"
    case "$msg" in
        ok*) ok; echo "$what: $msg" ;;
        *) bad "$what: $msg" ;;
    esac
}

code="Write a Python function that computes the Fibonacci numbers, then explain it."
same_as_plain "ngram, chat, max_tokens" ngram --chat -p "$code" -n 64
same_as_plain "self, chat, max_tokens, K 6" "self --spec-tokens 6" --chat -p "$code" -n 48
same_as_plain "ngram, end of generation" ngram --chat -p "What is the capital of France?" -n 100
same_as_plain "ngram, stop string" ngram --chat -p "$code" -n 64 --stop "return"
rep="The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fox"
same_as_plain "ngram, repetitive text, K 8" "ngram --spec-tokens 8" -p "$rep" -n 40 --ignore-eos
# the adaptive length (0..K drafts a step, chosen from the acceptance and the measured costs) keeps the tokens
same_as_plain "ngram, adaptive, K 8" "ngram --spec-tokens 8 --spec-adaptive" --chat -p "$code" -n 64
same_as_plain "self, adaptive" "self --spec-adaptive" -p "$rep" -n 40 --ignore-eos

# sampling runs and reports statistics
if out="$(timeout 120 "$cli" generate -m "$model" --temp 0.8 --seed 7 --json --draft ngram -p "$rep" -n 24 2>&1)" &&
   grep -q '"spec": {"drafts"' <<<"$out"; then ok; else bad "sampling with --draft ngram: $out"; fi

# expect_error "what" "pattern" args...
expect_error() {
    local what="$1" pat="$2"
    shift 2
    local err rc
    err="$(timeout 120 "$cli" generate -m "$model" -p "hi" -n 2 "$@" 2>&1 >/dev/null)"
    rc=$?
    if [ $rc -ne 1 ]; then bad "$what: exit $rc (want 1): $err"; return; fi
    if ! grep -qiE "$pat" <<<"$err"; then bad "$what: message '$err' lacks /$pat/"; return; fi
    ok
}
expect_error "bad --draft" "ngram, self, model:PATH" --draft psychic
expect_error "empty model path" "ngram, self, model:PATH" --draft model:
expect_error "missing draft model" "nope|no such|cannot open|not found" --draft "model:$tmp/nope.gguf"
expect_error "vocabulary mismatch" "vocabulary" --draft "model:$src/tests/data/models/llama_gqa.Q8_0.gguf"
expect_error "--spec-tokens 0" "out of range" --draft ngram --spec-tokens 0
expect_error "--spec-tokens 33" "out of range" --draft ngram --spec-tokens 33
expect_error "--spec-tokens alone" "needs --draft" --spec-tokens 4
expect_error "--spec-adaptive alone" "needs --draft" --spec-adaptive

echo "test_spec_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
