"""Tools (function calling) through `oasiskv serve`, as an OpenAI client sees them (run by
tests/sh/test_tools_server.sh), with the SmolLM2-135M GGUF:

- its own template (no tools): tools with tool_choice "auto" refused with a clear error; a forced call
  (tool_choice naming the function, or "required" with one tool) generated under the function's parameters
  schema, returned as tool_calls through the official openai client, streamed as argument deltas that join
  to the same arguments; "required" with several tools (an array of calls, one with parallel_tool_calls
  false) valid for the function each names, streamed the same; tool results refused; the malformed tools and choices refused by name;
  the legacy functions / function_call: a call forced by name equal to the forced tool call, as message.function_call
  and streamed as delta.function_call; their malformed forms refused by name;
- Qwen2.5's template with tools (serve --chat-template FILE, tests/data/chat_tools.json's): /tokenize of a conversation with tools, tool calls and tool results equal to
  the Hugging Face tokenizer's ids of the text transformers renders (add_generation_prompt false too, and
  continue_final_message); replies parsed into tool_calls
  (guided_choice makes the model write a call, or plain text), streamed and not, with finish_reason
  "tool_calls" (streamed: a call's name first, then its arguments in pieces that join to the whole reply's), and with
  the legacy functions as function_call (finish_reason "function_call"; a legacy conversation tokenized as its tools
  form); a free greedy reply well formed either way; with --reasoning-parser qwen3, a reply's <think>
  part as reasoning_content (message, stream deltas), its calls read from the rest;
- DeepSeek-R1's template (--chat-template given as the text itself) with --reasoning-parser deepseek_r1: the
  reply's thinking (it starts inside it) as reasoning_content, whole and streamed, also when cut off there;
- Qwen3's template with --default-chat-template-kwargs '{"enable_thinking": false}': /tokenize of the fixture's
  conversations (reasoning_content in messages, chat_template_kwargs given or the default) equal to the Hugging Face
  ids of transformers' rendering; a reply with thinking turned off all content; malformed kwargs and
  reasoning_content refused by name; the template whose generation prompt opens <think> (Qwen3-Thinking-2507's) with
  --reasoning-parser qwen3: the reply read from inside the thinking, whole and streamed;
- Llama 3.2's (3.1's with today's date): /tokenize with and without chat_template_kwargs' date_string;
- Llama 3.1's template (--tokenizer: SmolLM2's tokenizer.json with that template in its tokenizer_config.json) the
  same way (tools as json.dumps(indent=4) in the first user turn, tool results as JSON
  strings, replies that are {"name", "parameters"} objects read into tool_calls).
"""
import json
import os
import shutil
import sys
import tempfile
import urllib.request

import openai

import serve_util
from serve_util import check, failures, post
from tokenizers import Tokenizer

CLI, MODEL, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
FIX = json.load(open(os.path.join(SRC, "tests", "data", "chat_tools.json")))


def serving(extra):
    return serve_util.serving(CLI, MODEL, extra, 2048)


def sse(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    evs = []
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.strip()
            if line.startswith(b"data: ") and line[6:] != b"[DONE]":
                evs.append(json.loads(line[6:]))
    return evs


def joined(evs):
    """content, tool calls (by index: id, name, arguments joined) and the finish reason of a streamed reply"""
    content, calls, finish = "", {}, None
    for ev in evs:
        for ch in ev.get("choices", []):
            d = ch.get("delta", {})
            content += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                c["id"] = tc.get("id") or c["id"]
                fn = tc.get("function") or {}
                c["name"] += fn.get("name") or ""
                c["arguments"] += fn.get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    return content, [calls[k] for k in sorted(calls)], finish


def joined_legacy(evs):
    """content, the function call (name and arguments joined; None without one) and the finish reason of a streamed
    reply to a request with the legacy 'functions'"""
    content, call, finish = "", None, None
    for ev in evs:
        for ch in ev.get("choices", []):
            d = ch.get("delta", {})
            content += d.get("content") or ""
            assert not d.get("tool_calls"), d
            fc = d.get("function_call")
            if fc:
                call = call or {"name": "", "arguments": ""}
                call["name"] += fc.get("name") or ""
                call["arguments"] += fc.get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    return content, call, finish


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
        "days": {"type": "integer"}}, "required": ["city", "days"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
UNITS = {"type": "function", "function": {"name": "set_units", "parameters": {
    "type": "object", "properties": {"unit": {"type": "string", "enum": ["metric", "imperial"]}}, "required": ["unit"]}}}
MSGS = [{"role": "user", "content": "What is the weather in Paris for the next 3 days?"}]


def own_template(port):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
    st, js = post(port, "/v1/chat/completions", {"messages": MSGS, "tools": [WEATHER], "max_tokens": 8})
    check(st == 400 and js["error"]["param"] == "tools" and "does not offer tools" in js["error"]["message"],
          f"own template: tool_choice auto refused ({st}: {js.get('error', {}).get('message', '')[:90]})")
    forced = {"type": "function", "function": {"name": "get_weather"}}
    r = client.chat.completions.create(model="smol", messages=MSGS, tools=[WEATHER, SEARCH], tool_choice=forced,
                                       max_tokens=60, temperature=0)
    ch = r.choices[0]
    tc = ch.message.tool_calls or []
    args = None
    if tc:
        try:
            args = json.loads(tc[0].function.arguments)
        except ValueError:
            pass
    check(len(tc) == 1 and tc[0].type == "function" and tc[0].function.name == "get_weather" and
          tc[0].id.startswith("chatcmpl-tool-") and ch.message.content is None and ch.finish_reason == "stop",
          f"forced call through the openai client: {tc[0].function if tc else None}, finish {ch.finish_reason}")
    check(isinstance(args, dict) and set(args) == {"city", "days"} and args["city"] in ("Paris", "Oslo", "Lima") and
          isinstance(args["days"], int), f"the arguments follow the parameters schema: {args}")
    forced_args = tc[0].function.arguments if tc else None
    evs = sse(port, {"messages": MSGS, "tools": [WEATHER, SEARCH], "tool_choice": forced, "max_tokens": 60,
                     "temperature": 0})
    content, calls, finish = joined(evs)
    first = next((ev for ev in evs if ev["choices"] and ev["choices"][0]["delta"].get("tool_calls")), None)
    check(len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["id"] and
          calls[0]["arguments"] == tc[0].function.arguments and content == "" and finish == "stop" and first and
          first["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "get_weather",
          f"forced call streamed: {len(evs)} events, arguments {calls[0]['arguments'] if calls else None!r}, content {content!r}, finish {finish}")
    r = client.chat.completions.create(model="smol", messages=MSGS, tools=[UNITS], tool_choice="required",
                                       max_tokens=200, temperature=0)
    tc = r.choices[0].message.tool_calls or []
    ok = r.choices[0].finish_reason == "stop" and len(tc) == 1 and tc[0].function.name == "set_units"
    check(ok and json.loads(tc[0].function.arguments)["unit"] in ("metric", "imperial"),
          f"required with one tool: {tc[0].function if tc else None}, finish {r.choices[0].finish_reason}")
    r = client.chat.completions.create(model="smol", messages=MSGS, tools=[SEARCH], tool_choice="required",
                                       max_tokens=3, temperature=0)
    tc = r.choices[0].message.tool_calls or []
    check(r.choices[0].finish_reason == "length" and len(tc) == 1 and len(tc[0].function.arguments) > 0,
          f"a forced call cut off by max_tokens: finish length, its arguments as far as written "
          f"({tc[0].function.arguments if tc else None!r})")
    r = client.chat.completions.create(model="smol", messages=MSGS, tools=[WEATHER], tool_choice="none", max_tokens=5,
                                       temperature=0)
    check(r.choices[0].message.content and not r.choices[0].message.tool_calls, "tool_choice none: a plain reply")
    for par in (True, False):
        body = {"messages": MSGS, "tools": [WEATHER, UNITS], "tool_choice": "required", "max_tokens": 150,
                "temperature": 0, "parallel_tool_calls": par}
        st, js = post(port, "/v1/chat/completions", body)
        ch = js["choices"][0] if st == 200 else {}
        tc = ch.get("message", {}).get("tool_calls") or []
        names = [t["function"]["name"] for t in tc]
        args = [json.loads(t["function"]["arguments"]) for t in tc]
        valid = all((n == "get_weather" and set(a) == {"city", "days"}) or (n == "set_units" and "unit" in a)
                    for n, a in zip(names, args))
        check(st == 200 and ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None and tc and valid
              and (par or len(tc) == 1), f"required with two tools (parallel {par}): {list(zip(names, args))}")
        content, calls, finish = joined(sse(port, body))
        check(finish == "tool_calls" and content == "" and
              [(c["name"], json.loads(c["arguments"])) for c in calls] == list(zip(names, args)),
              f"streamed the same: {[(c['name'], c['arguments']) for c in calls]}")
    legacy_forced(port, client, forced_args)
    bad = [({"tools": [WEATHER, {"type": "function", "function": {"name": "g", "parameters": {"$defs": {}}}}],
             "tool_choice": "required"}, "tool_choice", "$defs"),
           ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
            "not among"),
           ({"tools": [{"type": "function", "function": {"name": "x y"}}], "tool_choice": "required"}, "tools", "name"),
           ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
               "type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=a)b"}}}}}], "tool_choice": "required"},
            "tools", "lookbehind"),
           ({"messages": MSGS + [{"role": "tool", "content": "sunny"}]}, "messages", "tool"),
           ({"tools": [WEATHER], "tool_choice": forced, "response_format": {"type": "json_object"}}, "tool_choice",
            "give one")]
    for body, param, word in bad:
        st, js = post(port, "/v1/chat/completions", dict({"messages": MSGS, "max_tokens": 4}, **body))
        check(st == 400 and js["error"]["param"] == param and word in js["error"]["message"],
              f"refused ({param}): {js.get('error', {}).get('message', '')[:100]}")
    st, js = post(port, "/v1/completions", {"prompt": "x", "tools": [WEATHER], "max_tokens": 2})
    check(st == 400 and js["error"]["param"] == "tools", "tools on /v1/completions refused")


def legacy_forced(port, client, forced_args):
    """the legacy 'functions' / 'function_call' (the OpenAI API's form before tools) with the template without tools:
    a call forced by name is the forced tool call (same arguments) put as message.function_call"""
    fns = [WEATHER["function"], SEARCH["function"]]
    r = client.chat.completions.create(model="smol", messages=MSGS, functions=fns, function_call={"name": "get_weather"},
                                       max_tokens=60, temperature=0)
    ch = r.choices[0]
    fc = ch.message.function_call
    check(fc is not None and fc.name == "get_weather" and fc.arguments == forced_args and not ch.message.tool_calls and
          ch.message.content is None and ch.finish_reason == "stop",
          f"legacy function_call {{name}} through the openai client: {fc}, tool_calls {ch.message.tool_calls}, "
          f"finish {ch.finish_reason} (the forced tool call's arguments {forced_args!r})")
    body = {"messages": MSGS, "functions": fns, "function_call": {"name": "get_weather"}, "max_tokens": 60,
            "temperature": 0}
    evs = sse(port, body)
    content, call, finish = joined_legacy(evs)
    firsts = [ev["choices"][0]["delta"]["function_call"] for ev in evs
              if ev["choices"] and ev["choices"][0]["delta"].get("function_call")]
    check(call == {"name": "get_weather", "arguments": forced_args} and content == "" and finish == "stop" and
          len(firsts) >= 2 and firsts[0].get("name") == "get_weather" and all("name" not in x for x in firsts[1:]),
          f"legacy function call streamed in {len(firsts)} pieces: {call}, content {content!r}, finish {finish}")
    r = client.chat.completions.create(model="smol", messages=MSGS, functions=fns, function_call="none", max_tokens=5,
                                       temperature=0)
    check(r.choices[0].message.content and not r.choices[0].message.function_call, "function_call none: a plain reply")
    bad = [({"functions": fns}, "functions", "does not offer tools"),
           ({"functions": fns, "tools": [WEATHER]}, "functions", "give"),
           ({"functions": fns, "tool_choice": "auto"}, "functions", "give"),
           ({"functions": fns, "function_call": {"name": "nope"}}, "function_call", "not among 'functions'"),
           ({"functions": fns, "function_call": "required"}, "function_call", "must be"),
           ({"functions": [{"name": "x y"}], "function_call": {"name": "x y"}}, "functions", "functions[0].name"),
           ({"functions": [{"name": "f", "parameters": 3}], "function_call": {"name": "f"}}, "functions", "parameters"),
           ({"functions": {"name": "f"}}, "functions", "array"),
           ({"function_call": {"name": "get_weather"}}, "function_call", "needs 'functions'"),
           ({"functions": [{"name": "f", "parameters": {"type": "object", "properties": {
               "a": {"type": "string", "pattern": "(?<=a)b"}}}}], "function_call": {"name": "f"}},
            "functions", "lookbehind"),
           ({"messages": MSGS + [{"role": "user", "content": "x", "function_call": {"name": "f", "arguments": "{}"}}]},
            "messages", "only an assistant"),
           ({"messages": MSGS + [{"role": "assistant", "function_call": {"name": "f", "arguments": "{x"}}]},
            "messages", "function_call.arguments is not valid JSON")]
    for body, param, word in bad:
        st, js = post(port, "/v1/chat/completions", dict({"messages": MSGS, "max_tokens": 4}, **body))
        check(st == 400 and js["error"]["param"] == param and word in js["error"]["message"],
              f"legacy refused ({param}): {js.get('error', {}).get('message', '')[:100]}")
    st, js = post(port, "/v1/completions", {"prompt": "x", "functions": fns, "max_tokens": 2})
    check(st == 400 and js["error"]["param"] == "functions", "functions on /v1/completions refused")


def legacy_auto(port, call, two):
    """the legacy 'functions' with Qwen2.5's template: offered as the tools are (the same prompt), a conversation's
    legacy function_call and role 'function' messages read as its tool call and tool result; a reply's call as
    message.function_call (the first of two), finish_reason 'function_call', streamed the same"""
    fns = [WEATHER["function"], SEARCH["function"]]
    new = MSGS + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3.0}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": '{"forecast": "sun"}'}]
    old = MSGS + [{"role": "assistant", "content": None, "function_call": {"name": "get_weather",
                                                                          "arguments": '{"city": "Paris", "days": 3.0}'}},
                  {"role": "function", "name": "get_weather", "content": '{"forecast": "sun"}'}]
    a = post(port, "/tokenize", {"messages": new, "tools": [WEATHER, SEARCH]})
    b = post(port, "/tokenize", {"messages": old, "functions": fns})
    check(a[0] == 200 and b == a and len(a[1]["tokens"]) > 100,
          f"/tokenize: functions and a legacy conversation = tools and tool messages ({a[0]} {b[0]}, "
          f"{len(a[1].get('tokens', []))} / {len(b[1].get('tokens', []))} tokens)")
    for text in (call, two):
        body = {"messages": MSGS, "functions": fns, "max_tokens": 80, "temperature": 0, "guided_choice": [text]}
        st, js = post(port, "/v1/chat/completions", body)
        ch = js["choices"][0] if st == 200 else {}
        m = ch.get("message", {})
        fc = m.get("function_call") or {}
        check(st == 200 and fc.get("name") == "get_weather" and json.loads(fc["arguments"]) == {"city": "Oslo", "days": 2}
              and "tool_calls" not in m and m["content"] is None and ch["finish_reason"] == "function_call",
              f"a reply's call read into function_call: {m}, finish {ch.get('finish_reason')}")
        content, c, finish = joined_legacy(sse(port, body))
        check(content == "" and finish == "function_call" and c == fc, f"the same streamed: {c} / {content!r} / {finish}")


def hermes_template(port):
    hf = Tokenizer.from_file(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))
    for i, case in enumerate(FIX["cases"]):
        msgs = []
        for m in case["messages"]:
            o = {"role": m["role"], "content": m["content"]}
            if m["tool_calls"]:
                o["tool_calls"] = [{"id": f"c{k}", "type": "function",
                                    "function": {"name": c["name"], "arguments": c["arguments"]}}
                                   for k, c in enumerate(m["tool_calls"])]
            msgs.append(o)
        body = {"messages": msgs}
        if case["tools"]:
            body["tools"] = [json.loads(t) for t in case["tools"]]
        if not case["gen"]:
            body["add_generation_prompt"] = False
        st, js = post(port, "/tokenize", body)
        want = hf.encode(case["expect"], add_special_tokens=False).ids
        check(st == 200 and js["tokens"] == want, f"/tokenize of conversation {i} with tools = the HF tokenizer's ids of "
              f"transformers' rendering ({len(want)} tokens; {st} {str(js)[:80] if st != 200 else ''})")
    # continue_final_message: the last message left open, as transformers cuts it
    for case in [c for c in FIX["continue"] if c["family"] == "qwen25"]:
        msgs = [{"role": m["role"], "content": m["content"]} for m in case["messages"]]
        body = {"messages": msgs, "add_generation_prompt": False, "continue_final_message": True}
        st, js = post(port, "/tokenize", body)
        want = hf.encode(case["expect"], add_special_tokens=False).ids
        check(st == 200 and js["tokens"] == want, f"continue_final_message: /tokenize = the HF ids of transformers' "
              f"rendering ({len(want)} tokens; {st})")
        st, js = post(port, "/v1/chat/completions", dict(body, max_tokens=3, temperature=0))
        check(st == 200 and js["usage"]["prompt_tokens"] == len(want), f"continue_final_message: a reply continues "
              f"the {len(want)} tokens ({st}: {str(js)[:100]})")
    st, js = post(port, "/v1/chat/completions", {"messages": MSGS, "continue_final_message": True, "max_tokens": 2})
    check(st == 400 and js["error"]["param"] == "continue_final_message", "continue_final_message with the generation "
          f"prompt refused: {js.get('error', {}).get('message', '')[:80]}")
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>'
    two = call + '\n<tool_call>\n{"name": "search", "arguments": {"q": "umbrella \\"sale\\""}}\n</tool_call>'
    for text, n in ((call, 1), (two, 2)):
        body = {"messages": MSGS, "tools": [WEATHER, SEARCH], "max_tokens": 80, "temperature": 0,
                "guided_choice": [text]}
        st, js = post(port, "/v1/chat/completions", body)
        ch = js["choices"][0] if st == 200 else {}
        tc = ch.get("message", {}).get("tool_calls") or []
        check(st == 200 and len(tc) == n and tc[0]["function"]["name"] == "get_weather" and
              json.loads(tc[0]["function"]["arguments"]) == {"city": "Oslo", "days": 2} and
              ch["message"]["content"] is None and ch["finish_reason"] == "tool_calls" and
              (n == 1 or json.loads(tc[1]["function"]["arguments"]) == {"q": 'umbrella "sale"'}),
              f"a reply of {n} call(s) read into tool_calls: {[t['function'] for t in tc]}")
        evs = sse(port, body)
        content, calls, finish = joined(evs)
        check(content == "" and finish == "tool_calls" and
              [(c["name"], c["arguments"]) for c in calls] ==
              [(t["function"]["name"], t["function"]["arguments"]) for t in tc] and all(c["id"] for c in calls),
              f"the same reply streamed: {calls}")
        # the arguments stream as they are written: a call's pieces come in several chunks, its id and name first
        pieces = [tc for ev in evs for ch in ev["choices"] for tc in (ch.get("delta") or {}).get("tool_calls") or []
                  if tc["index"] == 0]
        check(len(pieces) >= 3 and pieces[0].get("id") and pieces[0]["function"].get("name") == "get_weather" and
              all("id" not in x and "name" not in x["function"] for x in pieces[1:]),
              f"call 0 streamed in {len(pieces)} pieces: {[x['function'].get('arguments') for x in pieces]}")
    legacy_auto(port, call, two)
    body = {"messages": MSGS, "tools": [WEATHER], "max_tokens": 20, "temperature": 0,
            "guided_choice": ["It is <tool sunny>"]}
    st, js = post(port, "/v1/chat/completions", body)
    check(st == 200 and js["choices"][0]["message"]["content"] == "It is <tool sunny>" and
          not js["choices"][0]["message"].get("tool_calls") and js["choices"][0]["finish_reason"] == "stop",
          f"a reply without calls is content: {js['choices'][0]['message'] if st == 200 else js}")
    content, calls, finish = joined(sse(port, body))
    check(content == "It is <tool sunny>" and not calls and finish == "stop", f"streamed: {content!r} {finish}")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
    r = client.chat.completions.create(model="smol", messages=MSGS, tools=[WEATHER, SEARCH], max_tokens=40,
                                       temperature=0)
    m = r.choices[0].message
    check((m.content is not None or m.tool_calls) and r.choices[0].finish_reason in ("stop", "length", "tool_calls"),
          f"a free reply with tools offered: content {str(m.content)[:40]!r}, calls {m.tool_calls}")
    hist = MSGS + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": '{"forecast": "sun"}'}]
    r = client.chat.completions.create(model="smol", messages=hist, tools=[WEATHER], max_tokens=10, temperature=0)
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), "a conversation with a tool's result answered")
    st, js = post(port, "/v1/chat/completions", {"messages": MSGS[:1] + [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{not json"}}]}], "max_tokens": 2})
    check(st == 400 and "arguments is not valid JSON" in js["error"]["message"], "bad arguments refused")
    # --reasoning-parser qwen3: the <think> part as reasoning_content (the replies above open without it: content)
    think = "<think>\nThe user wants Oslo.\n</think>\n\n"
    for tail, n_calls in (("It is cold.", 0), (call, 1)):
        body = {"messages": MSGS, "tools": [WEATHER], "max_tokens": 120, "temperature": 0,
                "guided_choice": [think + tail]}
        st, js = post(port, "/v1/chat/completions", body)
        m = js["choices"][0]["message"] if st == 200 else {}
        tc = m.get("tool_calls") or []
        ok = st == 200 and m.get("reasoning_content") == "\nThe user wants Oslo.\n" and len(tc) == n_calls
        ok = ok and (m["content"] == "\n\nIt is cold." if n_calls == 0 else
                     m["content"] == "\n\n" and json.loads(tc[0]["function"]["arguments"])["city"] == "Oslo")
        check(ok, f"reasoning_content apart ({n_calls} calls): {m}")
        evs = sse(port, body)
        content, calls, finish = joined(evs)
        reasoning = "".join((ch.get("delta") or {}).get("reasoning_content") or "" for ev in evs for ch in ev["choices"])
        check(reasoning == m.get("reasoning_content") and content == m.get("content") and len(calls) == n_calls and
              finish == js["choices"][0]["finish_reason"],
              f"streamed as reasoning_content deltas: {reasoning!r} / {content!r} / {len(calls)} calls / {finish}")


def llama_messages(case):
    """a Llama 3.x fixture case's messages as a request sends them (a tool's result as the text, not its JSON)"""
    msgs = []
    for m in case["messages"]:
        o = {"role": m["role"], "content": json.loads(m["content"]) if m["role"] == "tool" else m["content"]}
        if m["tool_calls"]:
            o["tool_calls"] = [{"id": "c0", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                               for c in m["tool_calls"]]
        msgs.append(o)
    return msgs


def llama31_template(port):
    """Llama 3.1's template over SmolLM2's tokenizer (its bos <|im_start|> for <|begin_of_text|>; the header tokens
    are plain text to both tokenizers)"""
    hf = Tokenizer.from_file(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))
    for i, case in enumerate(FIX["llama31"]["cases"]):
        if not case["gen"]:
            continue
        body = {"messages": llama_messages(case), "tools": [json.loads(t) for t in case["tools"]]}
        st, js = post(port, "/tokenize", body)
        want = hf.encode(case["expect"].replace("<|begin_of_text|>", "<|im_start|>"), add_special_tokens=False).ids
        check(st == 200 and js["tokens"] == want, f"llama3.1: /tokenize of conversation {i} with tools = the HF ids of "
              f"transformers' rendering ({len(want)} tokens; {st} {str(js)[:80] if st != 200 else ''})")
    call = '{"name": "get_weather", "parameters": {"city": "Lima", "days": 1}}'
    body = {"messages": MSGS, "tools": [WEATHER, SEARCH], "max_tokens": 60, "temperature": 0, "guided_choice": [call]}
    st, js = post(port, "/v1/chat/completions", body)
    ch = js["choices"][0] if st == 200 else {}
    tc = ch.get("message", {}).get("tool_calls") or []
    check(st == 200 and len(tc) == 1 and tc[0]["function"]["name"] == "get_weather" and
          json.loads(tc[0]["function"]["arguments"]) == {"city": "Lima", "days": 1} and ch["message"]["content"] is None
          and ch["finish_reason"] == "tool_calls", f"llama3.1: a JSON call read into tool_calls: {tc}")
    content, calls, finish = joined(sse(port, body))
    check(content == "" and finish == "tool_calls" and len(calls) == 1 and
          json.loads(calls[0]["arguments"]) == {"city": "Lima", "days": 1}, f"llama3.1: streamed the same: {calls}")
    body["guided_choice"] = ["Sunny {mostly}."]
    content, calls, finish = joined(sse(port, body))
    check(content == "Sunny {mostly}." and not calls and finish == "stop", f"llama3.1: plain text streamed: {content!r}")
    st, js = post(port, "/v1/chat/completions", {"messages": MSGS + [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"type": "function", "function": {"name": "b", "arguments": "{}"}}]}], "max_tokens": 2})
    check(st == 400 and "one a message" in js["error"]["message"], "llama3.1: two calls in a turn refused")


def llama32_dates(port):
    """Llama 3.2's template (3.1's with today's date): /tokenize with chat_template_kwargs' date_string, and without it
    today's date as Python's strftime writes it (transformers' strftime_now)"""
    import datetime
    hf = Tokenizer.from_file(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))
    n = 0
    for i, case in enumerate(FIX["llama32"]["cases"]):
        if not case["gen"]:
            continue
        body = {"messages": llama_messages(case), "tools": [json.loads(t) for t in case["tools"]]}
        want = case["expect"]
        if case["date_string"]:
            body["chat_template_kwargs"] = {"date_string": case["date_string"]}
        else:
            want = want.replace("Today Date: " + case["today"],
                                "Today Date: " + datetime.datetime.now().strftime("%d %b %Y"))
        st, js = post(port, "/tokenize", body)
        want_ids = hf.encode(want.replace("<|begin_of_text|>", "<|im_start|>"), add_special_tokens=False).ids
        n += check(st == 200 and js["tokens"] == want_ids, f"llama3.2: /tokenize of conversation {i} (date_string "
                   f"{case['date_string']}) = the HF ids of transformers' rendering ({len(want_ids)} tokens)")
    check(n == 6, f"llama3.2: {n} conversations compared")
    st, js = post(port, "/tokenize", {"messages": MSGS, "chat_template_kwargs": {"date_string": 5}})
    check(st == 400 and "date_string must be a string" in js["error"]["message"], "llama3.2: a date_string not a string refused")


def thinking_replies(port, name, msgs, cases):
    """replies that start inside the thinking (text, its thinking, its answer): reasoning_content and content apart,
    whole and streamed"""
    for text, think, answer in cases:
        body = {"messages": msgs, "max_tokens": 40, "temperature": 0, "guided_choice": [text]}
        st, js = post(port, "/v1/chat/completions", body)
        m = js["choices"][0]["message"] if st == 200 else {}
        check(st == 200 and m.get("reasoning_content") == think and m.get("content") == answer,
              f"{name}: reasoning {m.get('reasoning_content')!r}, content {m.get('content')!r}")
        evs = sse(port, body)
        content, _, _ = joined(evs)
        reasoning = "".join((ch.get("delta") or {}).get("reasoning_content") or "" for ev in evs for ch in ev["choices"])
        check(reasoning == think and content == (answer or ""), f"{name} streamed: {reasoning!r} / {content!r}")


def deepseek_r1(port):
    """DeepSeek-R1's template (its tokens are plain text to SmolLM2's tokenizer) with --reasoning-parser deepseek_r1:
    the reply starts inside the thinking"""
    hf = Tokenizer.from_file(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))
    case = FIX["deepseek_r1"]["cases"][0]
    st, js = post(port, "/tokenize", {"messages": [{"role": m["role"], "content": m["content"]} for m in case["messages"]]})
    want = hf.encode(case["expect"].replace("<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<|im_start|>"),
                     add_special_tokens=False).ids
    check(st == 200 and js["tokens"] == want, f"deepseek-r1: /tokenize = the HF ids of transformers' rendering ({len(want)})")
    thinking_replies(port, "deepseek_r1", [{"role": "user", "content": "2+2?"}],
                     (("Two and two.\n</think>\n\n4", "Two and two.\n", "\n\n4"),
                      ("still thinking", "still thinking", None)))


def qwen3_messages(case):
    msgs = []
    for m in case["messages"]:
        o = {"role": m["role"], "content": m["content"]}
        if "reasoning_content" in m:
            o["reasoning_content"] = m["reasoning_content"]
        if m["tool_calls"]:
            o["tool_calls"] = [{"id": f"c{k}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                               for k, c in enumerate(m["tool_calls"])]
        msgs.append(o)
    return msgs


def qwen3_template(port, fix, name, default_think):
    """Qwen3's template (serve --chat-template), the server's default enable_thinking default_think"""
    hf = Tokenizer.from_file(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))
    n = 0
    for i, case in enumerate(fix["cases"]):
        if not case["gen"]:
            continue
        body = {"messages": qwen3_messages(case), "tools": [json.loads(t) for t in case["tools"]]}
        if case["enable_thinking"] is not None:
            body["chat_template_kwargs"] = {"enable_thinking": case["enable_thinking"]}
        elif default_think is not None:   # the server's default applies: the fixture's rendering without it is not it
            continue
        st, js = post(port, "/tokenize", body)
        want = hf.encode(case["expect"], add_special_tokens=False).ids
        n += check(st == 200 and js["tokens"] == want, f"{name}: /tokenize of conversation {i} = the HF ids of "
                   f"transformers' rendering ({len(want)} tokens; {st} {str(js)[:80] if st != 200 else ''})")
    check(n >= 3, f"{name}: {n} conversations compared")
    if default_think is False:
        st, js = post(port, "/tokenize", {"messages": [{"role": "user", "content": "hi"}]})
        want = hf.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
                         add_special_tokens=False).ids
        check(st == 200 and js["tokens"] == want, f"{name}: --default-chat-template-kwargs applies to a request without any")
        body = {"messages": MSGS, "max_tokens": 20, "temperature": 0, "guided_choice": ["It is cold."]}
        st, js = post(port, "/v1/chat/completions", body)
        m = js["choices"][0]["message"] if st == 200 else {}
        check(st == 200 and m.get("content") == "It is cold." and m.get("reasoning_content") is None,
              f"{name}: thinking off, the reply all content: {m}")
        for bad, what in (({"chat_template_kwargs": {"thinking": True}}, "'thinking' is not a variable"),
                          ({"chat_template_kwargs": {"enable_thinking": "no"}}, "must be true or false"),
                          ({"chat_template_kwargs": [1]}, "must be a JSON object")):
            st, js = post(port, "/v1/chat/completions", dict({"messages": MSGS, "max_tokens": 2}, **bad))
            check(st == 400 and js["error"]["param"] == "chat_template_kwargs" and what in js["error"]["message"],
                  f"{name}: {bad} refused ({st}: {js.get('error', {}).get('message', '')[:80]})")
        st, js = post(port, "/v1/chat/completions", {"messages": MSGS + [{"role": "assistant", "content": "x",
                                                                          "reasoning_content": 5}], "max_tokens": 2})
        check(st == 400 and "reasoning_content must be a string" in js["error"]["message"],
              f"{name}: a reasoning_content not a string refused")
    if default_think is None:   # the generation prompt opens <think>: the reply starts inside the thinking
        thinking_replies(port, name, MSGS, (("Cold there.\n</think>\n\nIt is cold.", "Cold there.\n", "\n\nIt is cold."),
                                            ("still thinking", "still thinking", None)))


def main():
    with serving([]) as port:
        own_template(port)
    tdir = tempfile.mkdtemp()
    try:
        shutil.copy(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"), tdir)
        cfg = json.load(open(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer_config.json")))
        cfg["chat_template"] = FIX["template"]
        json.dump(cfg, open(os.path.join(tdir, "tokenizer_config.json"), "w"))
        tpl = os.path.join(tdir, "qwen25.jinja")   # serve --chat-template: the model's tokenizer, another template
        open(tpl, "w").write(FIX["template"])
        with serving(["--chat-template", tpl, "--reasoning-parser", "qwen3"]) as port:
            hermes_template(port)
        with serving(["--chat-template", FIX["deepseek_r1"]["template"], "--reasoning-parser", "deepseek_r1"]) as port:
            deepseek_r1(port)
        for key, default in (("qwen3", False), ("qwen3_thinking", None)):
            tpl = os.path.join(tdir, key + ".jinja")
            open(tpl, "w").write(FIX[key]["template"])
            extra = ["--chat-template", tpl, "--reasoning-parser", "qwen3"]
            if default is not None:
                extra += ["--default-chat-template-kwargs", json.dumps({"enable_thinking": default})]
            with serving(extra) as port:
                qwen3_template(port, FIX[key], key, default)
        cfg["chat_template"] = FIX["llama31"]["template"]
        json.dump(cfg, open(os.path.join(tdir, "tokenizer_config.json"), "w"))
        with serving(["--tokenizer", tdir]) as port:
            llama31_template(port)
        cfg["chat_template"] = FIX["llama32"]["template"]
        json.dump(cfg, open(os.path.join(tdir, "tokenizer_config.json"), "w"))
        with serving(["--tokenizer", tdir]) as port:
            llama32_dates(port)
    finally:
        shutil.rmtree(tdir)
    print(f"{len(failures)} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


main()
