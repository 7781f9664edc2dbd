"""OpenAI's Responses API (POST /v1/responses) through `oasiskv serve`, as the official openai client sees it (run by
tests/sh/test_responses_server.sh), with the SmolLM2-135M GGUF. The reference for each reply is the same conversation
through /v1/chat/completions (greedy): the same text, tokens, calls and thinking; the client's own parsing (Response
objects) and its stream accumulator (client.responses.stream: every event typed, in order, joined into the final
response) read what the server writes.

- its own template: a string input with instructions, a list of messages (developer, assistant output_text,
  input_text parts), max_output_tokens cutting the reply (status incomplete), text.format json_schema, top_logprobs,
  vLLM's extras (stop, seed), streamed and not; sequence numbers in order; the prefix cache's tokens in the usage
  (cached_tokens, as the chat path's with --enable-prompt-tokens-details; absent there without it); bad requests
  refused with the field named;
- Qwen2.5's template with tools (tests/data/chat_tools.json's) and --reasoning-parser qwen3: function tools in the
  Responses form, a reply of calls as function_call items (streamed: the arguments in deltas), tool_choice naming a
  function, function_call / function_call_output input items as the chat path's tool_calls and tool messages, a
  reasoning reply as a reasoning item before the message or the calls (the blank line between thinking and calls is
  no message item), a reasoning item given back as the next assistant message's reasoning_content;
- stored responses: GET /v1/responses/{id} (client.responses.retrieve) gives back what the create returned, streamed
  or not; previous_response_id goes on from a response = the chat path's reply to the whole conversation (its
  instructions not carried over, as OpenAI's API), also after a call (function_call_output); input_items listed
  in either order, paged (limit, after); DELETE; store false, an unknown or evicted id (serve --max-stored-responses)
  and a server that keeps none (--max-stored-responses 0) refused with the field named.
"""
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
import urllib.error

import openai

import serve_util
from serve_util import check, failures, post
from tokenizers import Tokenizer

CLI, MODEL, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
FIX = json.load(open(os.path.join(SRC, "tests", "data", "chat_tools.json")))
HF = Tokenizer.from_file(os.path.join(SRC, "tests", "data", "smollm2", "tokenizer.json"))


def serving(extra):
    return serve_util.serving(CLI, MODEL, extra, 1024)


def events(port, body):
    """the raw server-sent events of a streamed response: (event line, data object)"""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/responses", data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    out, name = [], None
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[6:])))
                name = None
    return out


def chat(port, body):
    st, js = post(port, "/v1/chat/completions", body)
    assert st == 200, js
    return js


def stream_final(client, **kw):
    """the client's stream helper: every event it saw (types) and the response it accumulated"""
    types, last = [], None
    with client.responses.stream(**kw) as s:
        for ev in s:
            types.append(ev.type)
            last = ev
        # (its final response comes with response.completed; one cut short ends with response.incomplete, whose
        # event carries the response with the output the helper accumulated)
        final = s.get_final_response() if last.type == "response.completed" else last.response
    return types, final


def msg_text(r):
    return "".join(c.text for it in r.output if it.type == "message" for c in it.content if c.type == "output_text")


def own_template(port):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
    q = "Name three colours of the rainbow."
    ref = chat(port, {"messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": q}],
                      "max_tokens": 64, "temperature": 0})
    want = ref["choices"][0]["message"]["content"]
    r = client.responses.create(model="smol", input=q, instructions="Answer briefly.", max_output_tokens=64, temperature=0)
    check(r.object == "response" and r.id.startswith("resp_") and r.model == "smol" and r.output_text == want and
          r.usage.input_tokens == ref["usage"]["prompt_tokens"] and
          r.usage.output_tokens == ref["usage"]["completion_tokens"] and
          r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens and
          r.instructions == "Answer briefly." and r.max_output_tokens == 64,
          f"a string input with instructions = the chat reply ({r.status}, {r.usage.input_tokens} + "
          f"{r.usage.output_tokens} tokens): {r.output_text!r}")
    check(len(r.output) == 1 and r.output[0].type == "message" and r.output[0].role == "assistant" and
          r.output[0].status == r.status and r.output[0].id.startswith("msg_"),
          f"one message item ({r.status}, finish {ref['choices'][0]['finish_reason']})")
    # streamed: the client's accumulator joins the events into the same response
    types, final = stream_final(client, model="smol", input=q, instructions="Answer briefly.", max_output_tokens=64,
                                temperature=0)
    check(final.output_text == want and final.usage.output_tokens == r.usage.output_tokens and final.id.startswith("resp_"),
          f"streamed through client.responses.stream: {final.output_text!r}")
    want_types = ["response.created", "response.in_progress", "response.output_item.added",
                  "response.content_part.added"]
    n_delta = sum(t == "response.output_text.delta" for t in types)
    check(types[:4] == want_types and types[4:4 + n_delta] == ["response.output_text.delta"] * n_delta and n_delta >= 2 and
          types[4 + n_delta:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                                  "response.completed" if r.status == "completed" else "response.incomplete"],
          f"the events in order ({n_delta} deltas): {types[:5]} ... {types[-4:]}")
    evs = events(port, {"input": q, "instructions": "Answer briefly.", "max_output_tokens": 64, "temperature": 0,
                        "stream_options": {"include_obfuscation": False}})
    check([d["sequence_number"] for _, d in evs] == list(range(len(evs))) and all(n == d["type"] for n, d in evs),
          f"{len(evs)} events: sequence numbers 0..{len(evs) - 1}, each event line naming its data's type")
    # cut by max_output_tokens
    r = client.responses.create(model="smol", input=q, max_output_tokens=3, temperature=0)
    check(r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens" and r.usage.output_tokens == 3,
          f"max_output_tokens 3: {r.status}, {r.incomplete_details}")
    types, final = stream_final(client, model="smol", input=q, max_output_tokens=3, temperature=0)
    check(types[-1] == "response.incomplete" and final.status == "incomplete" and final.output_text == r.output_text,
          f"streamed: ends with {types[-1]}, {final.output_text!r}")
    # a list of items: developer, user parts, an assistant's output_text, user
    items = [{"role": "developer", "content": "You are terse."},
             {"role": "user", "content": [{"type": "input_text", "text": "Hello."}, {"type": "input_text", "text": "Who are you?"}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A model."}]},
             {"role": "user", "content": "What can you do?"}]
    ref = chat(port, {"messages": [{"role": "system", "content": "You are terse."},
                                   {"role": "user", "content": "Hello.\nWho are you?"},
                                   {"role": "assistant", "content": "A model."},
                                   {"role": "user", "content": "What can you do?"}], "max_tokens": 16, "temperature": 0})
    r = client.responses.create(model="smol", input=items, max_output_tokens=16, temperature=0)
    check(r.output_text == ref["choices"][0]["message"]["content"] and r.usage.input_tokens == ref["usage"]["prompt_tokens"],
          f"a list of input items = the chat messages ({r.usage.input_tokens} tokens): {r.output_text!r}")
    # text.format json_schema = the chat path's response_format
    schema = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]},
                                                "count": {"type": "integer"}}, "required": ["colour", "count"],
              "additionalProperties": False}
    ref = chat(port, {"messages": [{"role": "user", "content": q}], "max_tokens": 40, "temperature": 0,
                      "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}})
    r = client.responses.create(model="smol", input=q, max_output_tokens=40, temperature=0,
                                text={"format": {"type": "json_schema", "name": "c", "schema": schema}})
    obj = json.loads(r.output_text) if r.status == "completed" else None
    check(r.output_text == ref["choices"][0]["message"]["content"] and obj is not None and set(obj) == {"colour", "count"}
          and r.text.format.type == "json_schema", f"text.format json_schema: {r.output_text!r}")
    # log-probabilities: top_logprobs, as the chat path's
    ref = chat(port, {"messages": [{"role": "user", "content": q}], "max_tokens": 6, "temperature": 0, "logprobs": True,
                      "top_logprobs": 2})
    r = client.responses.create(model="smol", input=q, max_output_tokens=6, temperature=0, top_logprobs=2,
                                include=["message.output_text.logprobs"])
    lp = r.output[0].content[0].logprobs or []
    want = ref["choices"][0]["logprobs"]["content"]
    check(len(lp) == len(want) == 6 and all(a.token == b["token"] and abs(a.logprob - b["logprob"]) < 1e-6 and
                                             len(a.top_logprobs) == 2 for a, b in zip(lp, want)),
          f"top_logprobs 2: {[(a.token, round(a.logprob, 3)) for a in lp]}")
    types, final = stream_final(client, model="smol", input=q, max_output_tokens=6, temperature=0, top_logprobs=2)
    flp = final.output[0].content[0].logprobs or []
    check([a.token for a in flp] == [b["token"] for b in want], f"streamed logprobs: {len(flp)} entries")
    # vLLM's extras pass through: stop, seed
    r = client.responses.create(model="smol", input=q, max_output_tokens=24, temperature=0, extra_body={"stop": [","]})
    ref = chat(port, {"messages": [{"role": "user", "content": q}], "max_tokens": 24, "temperature": 0, "stop": [","]})
    check(r.output_text == ref["choices"][0]["message"]["content"] and "," not in r.output_text,
          f"stop passes through: {r.output_text!r}")
    a = client.responses.create(model="smol", input=q, max_output_tokens=12, temperature=1.0, extra_body={"seed": 7})
    b = client.responses.create(model="smol", input=q, max_output_tokens=12, temperature=1.0, extra_body={"seed": 7})
    check(a.output_text == b.output_text, f"seed 7 twice: {a.output_text!r}")
    # bad requests: the field named, the server serving on
    bad = [({"input": q, "previous_response_id": "resp_1"}, "previous_response_id"),
           ({"input": q, "previous_response_id": 5}, "previous_response_id"),
           ({"input": q, "conversation": "conv_1"}, "conversation"),
           ({"messages": [{"role": "user", "content": q}]}, "messages"),
           ({"input": q, "max_tokens": 5}, "max_tokens"),
           ({"input": q, "stream": True, "stream_options": {"include_usage": True}}, "stream_options"),
           ({"max_output_tokens": 5}, "input"),
           ({"input": []}, "input"),
           ({"input": 5}, "input"),
           ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input"),
           ({"input": [{"type": "item_reference", "id": "x"}]}, "input"),
           ({"input": [{"role": "tool", "content": "x"}]}, "input"),
           ({"input": [{"type": "function_call", "name": "f"}]}, "input"),
           ({"input": q, "tools": [{"type": "web_search"}]}, "tools"),
           ({"input": q, "tool_choice": {"type": "mcp"}}, "tool_choice"),
           ({"input": q, "truncation": "auto"}, "truncation"),
           ({"input": q, "background": "yes"}, "background"),
           ({"input": q, "include": ["file_search_call.results"]}, "include"),
           ({"input": q, "text": {"format": {"type": "yaml"}}}, "text.format"),
           ({"input": q, "temperature": -1}, "temperature"),
           ({"input": "word " * 1100}, "input"),
           ({"input": q, "model": "other"}, "model")]
    for body, param in bad:
        st, js = post(port, "/v1/responses", body)
        err = js.get("error", {})
        check(st in (400, 404) and err.get("param") == param,
              f"refused ({st}, {param}): {err.get('message', js)[:110]}")
    # the prefix cache's tokens (serve --enable-prompt-tokens-details): the same long input twice, the second reads
    # all but its last block from the cache; the chat path's usage says the same count
    long_q = "Summarise this list: " + ", ".join(f"item {k} is {k * 7 % 13}" for k in range(40)) + "."
    a = client.responses.create(model="smol", input=long_q, max_output_tokens=2, temperature=0)
    b = client.responses.create(model="smol", input=long_q, max_output_tokens=2, temperature=0)
    ref = chat(port, {"messages": [{"role": "user", "content": long_q}], "max_tokens": 2, "temperature": 0})
    ca, cb = a.usage.input_tokens_details.cached_tokens, b.usage.input_tokens_details.cached_tokens
    check(a.usage.input_tokens == b.usage.input_tokens > 200 and cb >= a.usage.input_tokens - 16 and cb > ca + 150 and
          cb < b.usage.input_tokens and ref["usage"]["prompt_tokens_details"]["cached_tokens"] == cb,
          f"cached_tokens: {ca} then {cb} of {b.usage.input_tokens} (chat: {ref['usage']['prompt_tokens_details']})")
    types, final = stream_final(client, model="smol", input=long_q, max_output_tokens=2, temperature=0)
    check(final.usage.input_tokens_details.cached_tokens == cb, f"streamed: {final.usage.input_tokens_details}")
    st, js = post(port, "/v1/responses", None, raw=b"{not json")
    check(st == 400 and "not valid JSON" in js["error"]["message"], "a body that is not JSON refused")
    st, js = post(port, "/v1/responses", {"input": "Hi.", "max_output_tokens": 2})
    check(st == 200 and js["status"] in ("completed", "incomplete"), "still serving after the bad requests")


def get(port, path, method="GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stored(port):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
    q, q2 = "Name three colours of the rainbow.", "And two more?"
    r1 = client.responses.create(model="smol", input=q, instructions="Answer briefly.", max_output_tokens=24,
                                 temperature=0)
    g = client.responses.retrieve(r1.id)
    check(r1.store is True and g.id == r1.id and g.output_text == r1.output_text and g.usage == r1.usage and
          g.output[0].id == r1.output[0].id and g.instructions == "Answer briefly.",
          f"retrieve gives back the stored response {r1.id[:12]}...: {g.output_text!r}")
    # going on from it: the conversation through its output, then the new input; instructions are the new request's
    for inst in ("Answer briefly.", None):
        msgs = ([{"role": "system", "content": inst}] if inst else []) + [
            {"role": "user", "content": q}, {"role": "assistant", "content": r1.output_text}, {"role": "user", "content": q2}]
        ref = chat(port, {"messages": msgs, "max_tokens": 16, "temperature": 0})
        kw = {"instructions": inst} if inst else {}
        r2 = client.responses.create(model="smol", input=q2, previous_response_id=r1.id, max_output_tokens=16,
                                     temperature=0, **kw)
        check(r2.previous_response_id == r1.id and r2.output_text == ref["choices"][0]["message"]["content"] and
              r2.usage.input_tokens == ref["usage"]["prompt_tokens"],
              f"previous_response_id {'with' if inst else 'without'} instructions = the chat reply to the whole "
              f"conversation ({r2.usage.input_tokens} tokens): {r2.output_text!r}")
    # its input items: newest first by default, paged
    page = client.responses.input_items.list(r2.id)
    kinds = [(it.type, it.role) for it in page.data]
    texts = [it.content[0].text for it in page.data]
    check(kinds == [("message", "user"), ("message", "assistant"), ("message", "user")] and
          texts == [q2, r1.output_text, q] and page.data[1].id == r1.output[0].id and
          all(it.id for it in page.data) and page.has_more is False,
          f"input_items of the second response, newest first: {kinds}")
    asc = client.responses.input_items.list(r2.id, order="asc")
    p1 = client.responses.input_items.list(r2.id, order="asc", limit=1)
    p2 = client.responses.input_items.list(r2.id, order="asc", limit=1, after=p1.data[0].id)
    check([it.id for it in asc.data] == [it.id for it in reversed(page.data)] and p1.has_more and
          p1.first_id == p1.last_id == asc.data[0].id and [it.id for it in p2.data] == [asc.data[1].id] and p2.has_more,
          "order asc reverses them; limit 1 then after: the next one, has_more")
    # streamed responses are kept too, and a stream can go on from one
    types, f1 = stream_final(client, model="smol", input=q, max_output_tokens=12, temperature=0)
    g = client.responses.retrieve(f1.id)
    types, f2 = stream_final(client, model="smol", input=q2, previous_response_id=f1.id, max_output_tokens=12,
                             temperature=0)
    ref = chat(port, {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": f1.output_text},
                                   {"role": "user", "content": q2}], "max_tokens": 12, "temperature": 0})
    check(g.output_text == f1.output_text and g.status == f1.status and
          f2.output_text == ref["choices"][0]["message"]["content"] and f2.previous_response_id == f1.id,
          f"a streamed response stored, and a streamed one going on from it: {f2.output_text!r}")
    # not stored, deleted, unknown
    r3 = client.responses.create(model="smol", input=q, max_output_tokens=4, temperature=0, store=False)
    st, js = get(port, f"/v1/responses/{r3.id}")
    st2, js2 = post(port, "/v1/responses", {"input": q2, "previous_response_id": r3.id, "max_output_tokens": 4})
    check(r3.store is False and st == 404 and st2 == 404 and js2["error"]["param"] == "previous_response_id" and
          js2["error"]["code"] == "previous_response_not_found",
          f"store false: not kept (GET {st}; previous_response_id {st2}: {js2['error']['message'][:70]})")
    d = client.responses.delete(r1.id)
    st, js = get(port, f"/v1/responses/{r1.id}")
    st_d, _ = get(port, f"/v1/responses/{r1.id}", "DELETE")
    r4 = client.responses.create(model="smol", input="Thanks.", previous_response_id=r2.id, max_output_tokens=4,
                                 temperature=0)
    n4 = len(client.responses.input_items.list(r4.id, limit=100).data)
    check(d is None and st == 404 and js["error"]["param"] == "response_id" and st_d == 404 and n4 == 5,
          f"deleted: GET {st}, a second DELETE {st_d}; the response after it still goes on (its own copy of the "
          f"conversation: {n4} input items)")
    for path, method, want in (("/v1/responses/resp_nope", "GET", 404), ("/v1/responses/resp_nope/input_items", "GET", 404),
                               (f"/v1/responses/{r2.id}/input_items?limit=0", "GET", 400),
                               (f"/v1/responses/{r2.id}/input_items?order=up", "GET", 400),
                               (f"/v1/responses/{r2.id}/input_items?after=msg_nope", "GET", 400),
                               (f"/v1/responses/{r2.id}/other", "GET", 404),
                               (f"/v1/responses/{r2.id}/input_items", "DELETE", 405),
                               (f"/v1/responses/{r2.id}", "PUT", 405)):
        st, js = get(port, path, method)
        check(st == want and "error" in js, f"{method} {path.replace(r2.id, 'ID')}: {st} ({js['error']['message'][:60]})")
    st, js = post(port, "/v1/responses", {"input": q, "store": "yes"})
    check(st == 400 and js["error"]["param"] == "store", "store not a boolean: 400")
    # background: the reply is the response in progress; GET polls it until done, as the same request in the foreground
    fg = client.responses.create(model="smol", input=q, max_output_tokens=24, temperature=0)
    bg = client.responses.create(model="smol", input=q, max_output_tokens=24, temperature=0, background=True)
    status0 = bg.status
    deadline = time.time() + 120
    while bg.status in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.05)
        bg = client.responses.retrieve(bg.id)
    check(status0 in ("queued", "in_progress") and bg.status == fg.status and bg.background is True and
          bg.output_text == fg.output_text and bg.usage.output_tokens == fg.usage.output_tokens,
          f"background: {status0}, then polled to {bg.status}: {bg.output_text!r} as in the foreground")
    r5 = client.responses.create(model="smol", input=q2, previous_response_id=bg.id, max_output_tokens=8, temperature=0)
    check(r5.status in ("completed", "incomplete") and len(client.responses.input_items.list(r5.id).data) == 3,
          "previous_response_id after a background response")
    long_bg = client.responses.create(model="smol", input="Tell me a very long story.", max_output_tokens=900,
                                      background=True, extra_body={"ignore_eos": True})
    time.sleep(0.3)
    c = client.responses.cancel(long_bg.id)
    g = client.responses.retrieve(long_bg.id)
    check(c.status == "cancelled" and g.status == "cancelled", f"cancel: {c.status}, then GET {g.status}")
    st1, js1 = post(port, f"/v1/responses/{r5.id}/cancel", {})
    st2, js2 = post(port, "/v1/responses/resp_nope/cancel", {})
    st3, js3 = get(port, f"/v1/responses/{r5.id}/cancel")
    st4, js4 = post(port, "/v1/responses", {"input": q, "background": True, "store": False})
    st5, js5 = post(port, "/v1/responses", {"input": q, "background": True, "stream": True})
    check([st1, st2, st3, st4, st5] == [400, 404, 405, 400, 400] and js4["error"]["param"] == "background",
          f"cancel of a foreground response {st1}, of an unknown id {st2}, GET .../cancel {st3}; background with "
          f"store false {st4}, streamed {st5} ({js5['error']['message'][:60]})")


def hermes(port):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
    weather = {"type": "function", "name": "get_weather", "description": "Current weather in a city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
                                                               "days": {"type": "integer"}},
                              "required": ["city", "days"], "additionalProperties": False}}
    search = {"type": "function", "name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                                                  "required": ["q"]}}
    chat_tools = [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in (weather, search)]
    q = "What is the weather in Paris for the next 3 days?"
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>'
    two = call + '\n<tool_call>\n{"name": "search", "arguments": {"q": "umbrella"}}\n</tool_call>'
    for text, n in ((call, 1), (two, 2)):
        ref = chat(port, {"messages": [{"role": "user", "content": q}], "tools": chat_tools, "max_tokens": 80,
                          "temperature": 0, "guided_choice": [text]})
        want = [(c["function"]["name"], c["function"]["arguments"]) for c in ref["choices"][0]["message"]["tool_calls"]]
        r = client.responses.create(model="smol", input=q, tools=[weather, search], max_output_tokens=80, temperature=0,
                                    extra_body={"guided_choice": [text]})
        got = [(it.name, it.arguments) for it in r.output if it.type == "function_call"]
        check(got == want and len(r.output) == n and all(it.call_id and it.id.startswith("fc_") for it in r.output) and
              r.status == "completed" and r.tools[0].name == "get_weather",
              f"a reply of {n} call(s) as function_call items: {got}")
        types, final = stream_final(client, model="smol", input=q, tools=[weather, search], max_output_tokens=80,
                                    temperature=0, extra_body={"guided_choice": [text]})
        fgot = [(it.name, it.arguments) for it in final.output if it.type == "function_call"]
        n_args = sum(t == "response.function_call_arguments.delta" for t in types)
        check(fgot == want and types.count("response.function_call_arguments.done") == n and n_args >= 2 * n and
              types[-1] == "response.completed", f"streamed: {n_args} argument deltas, {fgot}")
    # a tool's parameters keep their float literals (20.0, as json.dumps writes them into the template's tools): the
    # same prompt as the chat path's, which test_tools_server checks against transformers' rendering
    thermo = {"type": "function", "name": "set_temp", "parameters": {"type": "object", "properties": {
        "t": {"type": "number", "minimum": -10.0, "maximum": 40.0, "default": 20.0}}, "required": ["t"]}}
    ref = chat(port, {"messages": [{"role": "user", "content": q}], "max_tokens": 1,
                      "tools": [{"type": "function", "function": {k: v for k, v in thermo.items() if k != "type"}}]})
    r = client.responses.create(model="smol", input=q, tools=[thermo], max_output_tokens=1)
    st, js = post(port, "/tokenize", {"messages": [{"role": "user", "content": q}], "tools": [
        {"type": "function", "function": {"name": "set_temp", "parameters": {"type": "object", "properties": {
            "t": {"type": "number", "minimum": -10, "maximum": 40, "default": 20}}, "required": ["t"]}}}]})
    default = r.tools[0].parameters["properties"]["t"]["default"]
    check(r.usage.input_tokens == ref["usage"]["prompt_tokens"] and st == 200 and js["count"] < r.usage.input_tokens and
          isinstance(default, float),
          f"a tool's 20.0 kept: {r.usage.input_tokens} prompt tokens as the chat path's (with 20: {js.get('count')}); "
          f"the response's tools give it back as {default!r}")
    # tool_choice naming a function: the reply is that call, under its parameters
    r = client.responses.create(model="smol", input=q, tools=[weather, search], max_output_tokens=60, temperature=0,
                                tool_choice={"type": "function", "name": "get_weather"})
    fc = [it for it in r.output if it.type == "function_call"]
    args = json.loads(fc[0].arguments) if fc else {}
    check(len(fc) == 1 and fc[0].name == "get_weather" and set(args) == {"city", "days"},
          f"tool_choice get_weather: {fc[0].arguments if fc else r.output}")
    # a conversation with a call and its output = the chat path's tool_calls and tool message
    items = [{"role": "user", "content": q},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'},
             {"type": "function_call_output", "call_id": "call_1", "output": '{"forecast": "sun"}'}]
    msgs = [{"role": "user", "content": q},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"forecast": "sun"}'}]
    ref = chat(port, {"messages": msgs, "tools": chat_tools, "max_tokens": 12, "temperature": 0})
    check("prompt_tokens_details" not in ref["usage"], "without --enable-prompt-tokens-details the chat usage has no "
          f"prompt_tokens_details (vLLM's default): {ref['usage']}")
    r = client.responses.create(model="smol", input=items, tools=[weather, search], max_output_tokens=12, temperature=0)
    check(r.usage.input_tokens == ref["usage"]["prompt_tokens"] and
          (r.output_text or None) == ref["choices"][0]["message"]["content"],
          f"function_call / function_call_output items = the chat messages ({r.usage.input_tokens} tokens): "
          f"{r.output_text!r}")
    # the same through previous_response_id: a reply of a call, then its output going on from it
    rc = client.responses.create(model="smol", input=q, tools=[weather, search], max_output_tokens=80, temperature=0,
                                 extra_body={"guided_choice": [call]})
    fc = [it for it in rc.output if it.type == "function_call"]
    msgs = [{"role": "user", "content": q},
            {"role": "assistant", "tool_calls": [{"id": fc[0].call_id, "type": "function", "function": {
                "name": fc[0].name, "arguments": fc[0].arguments}}]},
            {"role": "tool", "tool_call_id": fc[0].call_id, "content": '{"forecast": "snow"}'}] if fc else []
    ref = chat(port, {"messages": msgs, "tools": chat_tools, "max_tokens": 12, "temperature": 0})
    r = client.responses.create(model="smol", previous_response_id=rc.id, tools=[weather, search], max_output_tokens=12,
                                temperature=0, input=[{"type": "function_call_output", "call_id": fc[0].call_id,
                                                       "output": '{"forecast": "snow"}'}])
    check(r.usage.input_tokens == ref["usage"]["prompt_tokens"] and
          (r.output_text or None) == ref["choices"][0]["message"]["content"],
          f"a call's output going on from its response (previous_response_id) = the chat messages "
          f"({r.usage.input_tokens} tokens): {r.output_text!r}")
    # thinking: a reasoning item, then the message (or the calls)
    think = "<think>\nThe user wants Oslo.\n</think>\n\n"
    for tail, n_calls in (("It is cold.", 0), (call, 1)):
        ref = chat(port, {"messages": [{"role": "user", "content": q}], "tools": chat_tools, "max_tokens": 120,
                          "temperature": 0, "guided_choice": [think + tail]})
        m = ref["choices"][0]["message"]
        r = client.responses.create(model="smol", input=q, tools=[weather], max_output_tokens=120, temperature=0,
                                    extra_body={"guided_choice": [think + tail]})
        kinds = [it.type for it in r.output]
        rs = r.output[0]
        ok = kinds[0] == "reasoning" and rs.content[0].text == m["reasoning_content"] and rs.id.startswith("rs_")
        ok = ok and (kinds[1:] == ["message"] and r.output_text == m["content"] if n_calls == 0 else
                     kinds == ["reasoning", "function_call"] and json.loads(r.output[-1].arguments)["city"] == "Oslo")
        check(ok, f"thinking as a reasoning item ({n_calls} calls): {kinds}, {rs.content[0].text if rs.content else None!r}")
        # its tokens: those up to the one that wrote </think>: not fewer than the thinking's text re-tokenized (the
        # masked greedy walk takes shorter tokens: 27 here against 13), fewer than the whole reply's
        rt = r.usage.output_tokens_details.reasoning_tokens
        n_think = len(HF.encode(think.rstrip(), add_special_tokens=False).ids)
        check(n_think <= rt < r.usage.output_tokens,
              f"reasoning_tokens {rt} of {r.usage.output_tokens} (the thinking's text re-tokenized: {n_think})")
        types, final = stream_final(client, model="smol", input=q, tools=[weather], max_output_tokens=120, temperature=0,
                                    extra_body={"guided_choice": [think + tail]})
        deltas = types.count("response.reasoning_text.delta")
        check([it.type for it in final.output] == kinds and final.output[0].content[0].text == m["reasoning_content"] and
              deltas >= 2 and msg_text(final) == msg_text(r) and final.usage.output_tokens_details.reasoning_tokens == rt,
              f"streamed: {deltas} reasoning deltas, items {[it.type for it in final.output]}, reasoning_tokens "
              f"{final.usage.output_tokens_details.reasoning_tokens}")
    # a reasoning item given back: the next assistant message's reasoning_content (Qwen's template drops it before
    # the last user turn, so the prompt equals the chat path's with the same message)
    items = [{"role": "user", "content": "Hi."},
             {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Greet."}]},
             {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": q}]
    msgs = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet."},
            {"role": "user", "content": q}]
    ref = chat(port, {"messages": msgs, "max_tokens": 8, "temperature": 0})
    r = client.responses.create(model="smol", input=items, max_output_tokens=8, temperature=0)
    check(r.usage.input_tokens == ref["usage"]["prompt_tokens"] and msg_text(r) == (ref["choices"][0]["message"]["content"] or "")
          and (r.usage.output_tokens_details.reasoning_tokens == 0) == (r.output[0].type != "reasoning"),
          f"a reasoning item given back ({r.usage.input_tokens} tokens; reasoning_tokens "
          f"{r.usage.output_tokens_details.reasoning_tokens})")


def main():
    with serving(["--enable-prompt-tokens-details"]) as port:
        own_template(port)
        stored(port)
    # the store's bound: the oldest dropped; none kept with 0
    with serving(["--max-stored-responses", "2"]) as port:
        ids = [post(port, "/v1/responses", {"input": f"Say {k}.", "max_output_tokens": 2})[1]["id"] for k in range(3)]
        sts = [get(port, f"/v1/responses/{i}")[0] for i in ids]
        check(sts == [404, 200, 200], f"--max-stored-responses 2: the oldest of 3 dropped ({sts})")
    # a server stopped while a background response runs: the response cancelled, the server exits cleanly
    p, port = serve_util.start(CLI, MODEL, [], 1024)
    st, js = post(port, "/v1/responses", {"input": "Tell me a very long story.", "max_output_tokens": 900,
                                          "background": True, "ignore_eos": True})
    time.sleep(0.3)
    p.terminate()
    rc = p.wait(60)
    check(st == 200 and js["status"] == "in_progress" and rc == 0, f"stopped with a background response running: exit {rc}")
    with serving(["--max-stored-responses", "0"]) as port:
        st, js = post(port, "/v1/responses", {"input": "Hi.", "max_output_tokens": 2})
        st2, js2 = get(port, f"/v1/responses/{js['id']}")
        st3, js3 = post(port, "/v1/responses", {"input": "Hi.", "previous_response_id": js["id"]})
        check(st == 200 and js["store"] is False and st2 == 404 and st3 == 400 and
              js3["error"]["param"] == "previous_response_id",
              f"--max-stored-responses 0: store false, GET {st2}, previous_response_id {st3} "
              f"({js3['error']['message'][:60]})")
    tdir = tempfile.mkdtemp()
    try:
        tpl = os.path.join(tdir, "qwen25.jinja")
        open(tpl, "w").write(FIX["template"])
        with serving(["--chat-template", tpl, "--reasoning-parser", "qwen3"]) as port:
            hermes(port)
    finally:
        shutil.rmtree(tdir, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


main()
