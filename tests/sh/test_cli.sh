#!/usr/bin/env bash
# label: unit
# The oasiskv command's contract: --help everywhere, JSON output, seeds, and one
# clear message with exit code 1 (never a crash or a hang) for every bad input.
set -uo pipefail
cli="$OKV_CLI"
data="$OKV_SOURCE_DIR/tests/data/models"
gguf="$data/llama_gqa.Q8_0.gguf"
hf="$data/qwen2_bias_tied"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect_error "what" "pattern in stderr" cmd...
expect_error() {
  local what="$1" pat="$2"
  shift 2
  local err rc
  err="$(timeout 60 "$@" 2>&1 >/dev/null)"
  rc=$?
  if [ $rc -ne 1 ]; then bad "$what: exit $rc (want 1): $err"; return; fi
  if ! grep -qiE "$pat" <<<"$err"; then bad "$what: message '$err' lacks /$pat/"; return; fi
  if [ -z "${LONG_OK:-}" ] && [ "$(wc -l <<<"$err")" -gt 3 ]; then bad "$what: more than a short message: $err"; return; fi
  ok
}

for c in "" generate tokenize info; do
  if timeout 10 $cli $c --help >/dev/null 2>&1; then ok; else bad "oasiskv $c --help"; fi
done
LONG_OK=1 expect_error "no command" "usage" $cli
LONG_OK=1 expect_error "unknown command" "unknown command" $cli frobnicate
expect_error "missing model" "no such file|cannot open|not found" $cli generate -m "$tmp/nope.gguf" --prompt-tokens 1,2
head -c 1000 "$gguf" > "$tmp/trunc.gguf"
expect_error "truncated gguf" "trunc|past the end|exceeds|short|corrupt" $cli generate -m "$tmp/trunc.gguf" --prompt-tokens 1,2
printf 'GGUX' > "$tmp/magic.gguf"; tail -c +5 "$gguf" >> "$tmp/magic.gguf"
expect_error "bad magic" "magic|not a gguf" $cli info -m "$tmp/magic.gguf"
: > "$tmp/empty.gguf"
expect_error "empty file" "trunc|empty|short|small" $cli info -m "$tmp/empty.gguf"
mkdir -p "$tmp/nocfg"
expect_error "folder without config" "config.json" $cli info -m "$tmp/nocfg"
expect_error "bad --temp" "temp.*not a number" $cli generate -m "$gguf" --prompt-tokens 1 --temp abc
expect_error "bad -n" "out of range" $cli generate -m "$gguf" --prompt-tokens 1 -n 0
expect_error "bad --top-p" "out of range" $cli generate -m "$gguf" --prompt-tokens 1 --top-p 2
expect_error "unknown option" "unknown option" $cli generate -m "$gguf" --prompt-tokens 1 --frobnicate
expect_error "missing value" "needs a value" $cli generate -m "$gguf" --prompt-tokens
expect_error "bad token list" "token id list" $cli generate -m "$gguf" --prompt-tokens 1,x,3
expect_error "token out of vocab" "vocabulary" $cli generate -m "$gguf" --prompt-tokens 1,99999
expect_error "prompt too long" "context" $cli generate -m "$gguf" --ctx 16 --prompt-tokens "$(seq -s, 1 20)"
expect_error "budget too small" "budget" $cli generate -m "$gguf" --prompt-tokens 1,2 --kv-budget 10
expect_error "device tier too small" "device tier" $cli generate -m "$gguf" --prompt-tokens 1,2 --kv-budget 128 --kv-device-mb 0.01
# a pool too small for one sparse sequence names what takes the room (the host tier's summaries)
expect_error "serve: pool too small" "cannot hold one sparse sequence.*summaries.*--kv-host-gb" \
  $cli serve -m "$gguf" --ctx 100000 --kv-budget 64 --kv-pool-gb 0.001 --kv-host-gb 0.5 --port 1
# a host tier larger than the sequences the pool holds can use is cut to what they use (its
# summaries would take device memory from sequences), and the server says so
err="$(timeout 5 $cli serve -m "$gguf" --kv-budget 128 --kv-pool-gb 0.001 --kv-host-gb 0.5 --kv-host-dtype fp8 --port 0 2>&1 >/dev/null)"
if grep -q "holds 3 sparse sequences" <<<"$err" && grep -q -- "--kv-host-gb 0.5: 3 sequences of 16 blocks use .* the host tier takes that" <<<"$err"; then ok
else bad "serve: host tier cut to what the sequences use: $err"; fi
# overlapped decoding is the default, and --no-async-scheduling turns it off (the startup line says which)
on="$(timeout 2 $cli serve -m "$gguf" --port 0 2>&1 >/dev/null | grep "oasiskv serve: model")"
off="$(timeout 2 $cli serve -m "$gguf" --port 0 --no-async-scheduling 2>&1 >/dev/null | grep "oasiskv serve: model")"
if grep -q ", async scheduling" <<<"$on" && [ -n "$off" ] && ! grep -q "async scheduling" <<<"$off"; then ok
else bad "serve: async scheduling on by default, off with --no-async-scheduling: '$on' / '$off'"; fi
expect_error "serve: bad host KV type" "not a host KV type" $cli serve -m "$gguf" --kv-budget 128 --kv-host-dtype int4 --port 0
expect_error "serve: sparse prefix caching with an fp8 host tier" "prefix caching in sparse mode needs" \
  $cli serve -m "$gguf" --kv-budget 128 --kv-host-dtype fp8 --enable-prefix-caching --port 0
# the default cache factor (2) falls back to 1 where only that fits one sequence; asked for, it is an error
err="$(timeout 5 $cli serve -m "$gguf" --ctx 8192 --kv-budget 2048 --kv-pool-gb 0.0068 --kv-host-gb 0.006 --port 0 2>&1 >/dev/null)"
if grep -q "too small for the default --kv-cache-factor 2; using 1" <<<"$err" && grep -q "holds 1 sparse sequences" <<<"$err"; then ok
else bad "serve: default cache factor fallback: $err"; fi
expect_error "serve: pool too small for the cache factor asked" "cannot hold one sparse sequence.*--kv-cache-factor" \
  $cli serve -m "$gguf" --ctx 8192 --kv-budget 2048 --kv-pool-gb 0.0068 --kv-host-gb 0.006 --kv-cache-factor 2 --port 0
expect_error "bad --predict" "predict" $cli generate -m "$gguf" --prompt-tokens 1,2 --predict psychic
expect_error "bench serve: unknown dataset name" "not supported" $cli bench serve --dataset-name sonnet
expect_error "bench serve: prefix_repetition with a file" "leave out --dataset" \
  $cli bench serve --dataset-name prefix_repetition --dataset /dev/null
expect_error "bad device" "device|cuda" $cli generate -m "$gguf" --prompt-tokens 1,2 --device tpu
expect_error "no prompt" "prompt" $cli generate -m "$gguf"
expect_error "no tokenizer" "tokenizer" $cli generate -m "$hf" -p "hello"

# JSON output: one object with the documented fields
out="$(timeout 60 $cli generate -m "$gguf" --prompt-tokens 5,6,7,8 -n 6 --temp 0 --ignore-eos --json)"
if python3 - "$out" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
assert o["prompt_tokens"] == [5, 6, 7, 8], o
assert len(o["tokens"]) == 6, o
for k in ("prompt_tokens", "generated_tokens", "prefill_tokens_per_s", "decode_tokens_per_s", "kv"):
    assert k in o["stats"], k
for k in ("budget_tokens", "device_bytes_peak", "host_bytes", "blocks_fetched", "fetch_bytes", "resident_in_time", "stall_ms", "prediction_recall"):
    assert k in o["stats"]["kv"], k
assert isinstance(o["text"], str)
PY
then ok; else bad "json output: $out"; fi

# prompts from files (longer than one command-line argument may be): --prompt-tokens @FILE (ids split by
# commas, spaces or newlines) gives the same tokens as the list; --prompt-file FILE the same as -p TEXT
printf '5, 6\n7\n\n8\n' > "$tmp/ids.txt"
f="$(timeout 60 $cli generate -m "$gguf" --prompt-tokens @"$tmp/ids.txt" -n 6 --temp 0 --ignore-eos --json)"
if [ "$(python3 -c 'import json,sys; a,b=(json.loads(x) for x in sys.argv[1:]); print(a["prompt_tokens"] == b["prompt_tokens"] and a["tokens"] == b["tokens"])' "$out" "$f" 2>/dev/null)" = True ]; then ok; else bad "--prompt-tokens @FILE: $f"; fi
printf 'hello world' > "$tmp/prompt.txt"
a="$(timeout 60 $cli generate -m "$gguf" -p "hello world" -n 8 --temp 0 --ignore-eos --json)"
b="$(timeout 60 $cli generate -m "$gguf" --prompt-file "$tmp/prompt.txt" -n 8 --temp 0 --ignore-eos --json)"
c="$(timeout 60 $cli generate -m "$gguf" --prompt-file - -n 8 --temp 0 --ignore-eos --json < "$tmp/prompt.txt")"
same_run() { python3 -c 'import json,sys; r=[json.loads(x) for x in sys.argv[1:]]; print(all((o["prompt_tokens"], o["tokens"]) == (r[0]["prompt_tokens"], r[0]["tokens"]) for o in r))' "$@" 2>/dev/null; }
if [ "$(same_run "$a" "$b" "$c")" = True ]; then ok; else bad "--prompt-file: '$b' / '$c' against -p's '$a'"; fi
expect_error "missing prompt file" "prompt-file.*cannot open" $cli generate -m "$gguf" --prompt-file "$tmp/none.txt"
expect_error "missing ids file" "prompt-tokens.*cannot open" $cli generate -m "$gguf" --prompt-tokens @"$tmp/none.txt"
printf '1,,x\n' > "$tmp/bad_ids.txt"
expect_error "bad ids file" "token id list" $cli generate -m "$gguf" --prompt-tokens @"$tmp/bad_ids.txt"
expect_error "two prompts" "exactly one" $cli generate -m "$gguf" -p hi --prompt-file "$tmp/prompt.txt"

# same seed, same output; the text path of a GGUF tokenizer
a="$(timeout 60 $cli generate -m "$gguf" -p "hello world" -n 12 --temp 1.0 --seed 42 --ignore-eos --json)"
b="$(timeout 60 $cli generate -m "$gguf" -p "hello world" -n 12 --temp 1.0 --seed 42 --ignore-eos --json)"
c="$(timeout 60 $cli generate -m "$gguf" -p "hello world" -n 12 --temp 1.0 --seed 43 --ignore-eos --json)"
ta="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens"])' "$a")"
tb="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens"])' "$b")"
tc="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["tokens"])' "$c")"
if [ "$ta" = "$tb" ]; then ok; else bad "same seed gave $ta and $tb"; fi
if [ "$ta" != "$tc" ]; then ok; else bad "seeds 42 and 43 gave the same 12 sampled tokens"; fi

# structured output in generate (--json-object, --json-schema FILE): SmolLM2's answers parse as JSON (the schema's
# instance: exactly its keys and types), greedy and sampled; bad schemas and combinations are refused by name
smol="$OKV_SOURCE_DIR/models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$smol" ]; then
  printf '{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"], "additionalProperties": false}' > "$tmp/schema.json"
  a="$(timeout 120 $cli generate -m "$smol" --chat -p "Describe a cat as JSON with name and age." --json-object -n 160 --temp 0 --json)"
  b="$(timeout 120 $cli generate -m "$smol" --chat -p "Describe a cat." --json-schema "$tmp/schema.json" -n 160 --temp 0.9 --seed 3 --json)"
  if python3 - "$a" "$b" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:])
assert a["finish_reason"] == "stop" and isinstance(json.loads(a["text"]), dict), a
o = json.loads(b["text"])
assert b["finish_reason"] == "stop" and sorted(o) == ["age", "name"] and isinstance(o["name"], str) and type(o["age"]) is int, b
PY
  then ok; else bad "generate --json-object / --json-schema: '$a' / '$b'"; fi
  printf '{"type": "objec"}' > "$tmp/bad_schema.json"
  expect_error "bad --json-schema" "json-schema.*objec.*not a JSON type" $cli generate -m "$smol" -p hi --json-schema "$tmp/bad_schema.json"
  expect_error "--json-object with --draft" "without --draft" $cli generate -m "$smol" -p hi --json-object --draft ngram
  # --regex: the whole text fully matches (Python's re checks it)
  a="$(timeout 60 $cli generate -m "$smol" --chat -p "What year is it?" -n 20 --temp 0 --json --regex '[0-9]{4}, [a-z]+')"
  if python3 - "$a" <<'PY'
import json, re, sys
t = json.loads(sys.argv[1])["text"]
assert re.fullmatch(r"[0-9]{4}, [a-z]+", t), t   # (cut by -n 20 or not: every such prefix past ", x" matches)
PY
  then ok; else bad "generate --regex: $a"; fi
  expect_error "--regex with a lookbehind" "look" $cli generate -m "$smol" -p hi --regex '(?<=a)b'
  expect_error "--regex with --json-object" "give one" $cli generate -m "$smol" -p hi --regex 'a' --json-object
  # --chat-template: a file, or the template itself, replaces the model's (a prompt's tokens count it); bad ones refused
  python3 -c 'import json,sys; open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["template"])' \
    "$OKV_SOURCE_DIR/tests/data/chat_tools.json" "$tmp/qwen.jinja"
  a="$(timeout 60 $cli generate -m "$smol" --chat -p hi -n 1 --temp 0 --json)"
  b="$(timeout 60 $cli generate -m "$smol" --chat -p hi -n 1 --temp 0 --json --chat-template "$tmp/qwen.jinja")"
  c="$(timeout 60 $cli generate -m "$smol" --chat -p hi -n 1 --temp 0 --json \
       --chat-template "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}")"
  if python3 - "$a" "$b" "$c" <<'PY'
import json, sys
a, b, c = (len(json.loads(x)["prompt_tokens"]) for x in sys.argv[1:])
assert b > a > c, (a, b, c)   # Qwen's default system prompt is longer than SmolLM2's; the plain ChatML has none
PY
  then ok; else bad "--chat-template: prompt tokens $a / $b / $c"; fi
  expect_error "--chat-template of no file" "give a file" $cli generate -m "$smol" --chat -p hi --chat-template /nonexistent
  expect_error "--chat-template of no known format" "not a template" $cli generate -m "$smol" --chat -p hi --chat-template "{{ x }}"
  expect_error "--chat-template without --chat" "needs --chat" $cli generate -m "$smol" -p hi --chat-template "$tmp/qwen.jinja"
  # --chat-template-kwargs: Qwen3's enable_thinking false closes an empty <think> block (the prompt's last tokens)
  python3 -c 'import json,sys; open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["qwen3"]["template"])' \
    "$OKV_SOURCE_DIR/tests/data/chat_tools.json" "$tmp/qwen3.jinja"
  a="$(timeout 60 $cli generate -m "$smol" --chat -p hi -n 1 --temp 0 --json --chat-template "$tmp/qwen3.jinja")"
  b="$(timeout 60 $cli generate -m "$smol" --chat -p hi -n 1 --temp 0 --json --chat-template "$tmp/qwen3.jinja" \
       --chat-template-kwargs '{"enable_thinking": false}')"
  c="$(timeout 60 $cli generate -m "$smol" --chat -p hi -n 1 --temp 0 --json --chat-template "$tmp/qwen3.jinja" \
       --chat-template-kwargs '{"enable_thinking": true}')"
  if python3 - "$a" "$b" "$c" <<'PY'
import json, sys
a, b, c = (json.loads(x)["prompt_tokens"] for x in sys.argv[1:])
assert a == c and b[:len(a)] == a and len(b) > len(a), (a, b, c)
PY
  then ok; else bad "--chat-template-kwargs enable_thinking: prompt tokens $a / $b / $c"; fi
  expect_error "--chat-template-kwargs of an unknown variable" "'thinking' is not a variable" \
    $cli generate -m "$smol" --chat -p hi --chat-template-kwargs '{"thinking": false}'
  expect_error "--chat-template-kwargs not JSON" "must be a JSON object" $cli generate -m "$smol" --chat -p hi --chat-template-kwargs '{'
  expect_error "--chat-template-kwargs without --chat" "needs --chat" $cli generate -m "$smol" -p hi --chat-template-kwargs '{}'
  expect_error "serve --default-chat-template-kwargs" "enable_thinking must be true or false" \
    $cli serve -m "$smol" --default-chat-template-kwargs '{"enable_thinking": 1}'
else
  echo "SKIP: structured output in generate (no $smol; scripts/fetch_model.sh fetches it)"
fi

# info names the architecture
if timeout 30 $cli info -m "$hf" | grep -q "qwen2"; then ok; else bad "info on $hf"; fi
if timeout 30 $cli info -m "$gguf" | grep -q "llama"; then ok; else bad "info on $gguf"; fi

# bench throughput: every request done, its prompt and output tokens counted; real
# weights and random ones from a config.json alone (--load-format dummy)
for args in "-m $gguf" "-m $OKV_SOURCE_DIR/bench/configs/tiny --load-format dummy"; do
  out="$(timeout 120 $cli bench throughput $args --device cpu --num-prompts 5 --input-len 40 --output-len 7 --max-num-seqs 3 2>/dev/null)"
  if grep -qE "^Throughput: [0-9.]+ requests/s" <<<"$out" && grep -q "Total num prompt tokens:  200$" <<<"$out" &&
     grep -q "Total num output tokens:  35$" <<<"$out"; then ok; else bad "bench throughput $args: $out"; fi
done
expect_error "bench throughput: bad --load-format" "load-format" $cli bench throughput -m "$gguf" --load-format bogus
expect_error "bench throughput: input too long" "context length" $cli bench throughput -m "$gguf" --input-len 1000000

# a model folder whose tokenizer makes ids past the model's vocabulary: refused at load
mkdir -p "$tmp/mixed"
cp "$data/llama_gqa/config.json" "$data/llama_gqa/model.safetensors" "$tmp/mixed/"
cp "$OKV_SOURCE_DIR/tests/data/smollm2/tokenizer.json" "$tmp/mixed/"
expect_error "tokenizer larger than the vocabulary" "tokenizer has [0-9]+ tokens, more than the model" \
  $cli generate -m "$tmp/mixed" -p "Hello world" -n 2

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
