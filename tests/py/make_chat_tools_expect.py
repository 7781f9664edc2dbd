#!/usr/bin/env python3
"""Reference renderings for tools in chat templates (tests/test_tokenizer.c, tests/test_tools.c), made with
transformers' Jinja renderer and Python's json module, written to tests/data/chat_tools.json:

- "template": Qwen2.5-Instruct's chat template (its tokenizer_config.json), which lists tools in <tools> and
  writes calls in <tool_call> (Hermes format);
- "cases": conversations with tools, tool calls and tool results: the tools as json.dumps writes them (the
  template's tojson), the messages, and what apply_chat_template renders;
- "pyjson": JSON texts and what json.dumps(json.loads(text), ensure_ascii=False) writes, the form the server
  must give tools and arguments in (its srv_pyjson), and with indent=4 ("pyjson4", Llama 3.1's tools);
- "llama31": the same for Llama 3.1's template (tools in the first user turn as tojson(indent=4), one call a
  turn as {"name", "parameters"}, results in ipython turns written as JSON strings): the tools as
  json.dumps(indent=4) and the tool results as json.dumps of their text, as the C renderer takes them;
- "deepseek_r1": DeepSeek-R1-Distill's template (no tools: the reasoning models' format, the thinking of earlier
  answers dropped, the generation prompt opening <think>);
- "qwen3": Qwen3's template (Hermes tools as Qwen2.5's, no default system prompt; an answer's thinking, from its
  reasoning_content or the <think> part of its content, kept only after the last user query; enable_thinking=False
  closes an empty <think> block in the generation prompt), with each case's enable_thinking (absent, True, False);
- "qwen3_thinking": the same template with the generation prompt opening <think> (as Qwen3-Thinking-2507's does);
- "continue": conversations of several of these templates rendered with continue_final_message (the last
  message left open: transformers cuts the text after it);
- "llama32": Llama 3.1's template with Llama 3.2's date (today's, from transformers' strftime_now, where 3.1 has
  26 Jul 2024), its cases rendered with date_string given (chat_template_kwargs) and without it ("today": the
  date transformers wrote, which a test replaces by its own today).

    python3 tests/py/make_chat_tools_expect.py [QWEN25_TEMPLATE.json LLAMA31_TEMPLATE.json R1_TEMPLATE.json
                                                QWEN3_TEMPLATE.json QWEN3_THINKING_TEMPLATE.json]
    (needs transformers; no model, no torch; a template given as - or left out is the fixture's)"""
import json
import os
import sys

from transformers.utils.chat_template_utils import render_jinja_template

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "chat_tools.json")


def template(k, *key):
    """argument k (a JSON file of the template text), or when it is absent or "-" the fixture's own"""
    if len(sys.argv) > k and sys.argv[k] != "-":
        return json.load(open(sys.argv[k]))
    d = json.load(open(OUT))
    for x in key:
        d = d[x]
    return d


TEMPLATE = template(1, "template")
LLAMA31 = template(2, "llama31", "template")
R1 = template(3, "deepseek_r1", "template")
QWEN3 = template(4, "qwen3", "template")
QWEN3T = template(5, "qwen3_thinking", "template")
# Llama 3.2's template is 3.1's with today's date (transformers' strftime_now) where 3.1 has 26 Jul 2024
L31_DATE = '''{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}'''
L32_DATE = '''{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}'''
assert L31_DATE in LLAMA31
LLAMA32 = LLAMA31.replace(L31_DATE, L32_DATE)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city, in \"C\" or \"F\".",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["C", "F"]}}, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web.\nReturns the top results.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer", "minimum": 1}},
                   "required": ["q"]}}}
NOPARAM = {"type": "function", "function": {"name": "now"}}
# float literals with integer values (json.dumps writes 20.0; the request's parsed tree alone would give 20)
THERMO = {"type": "function", "function": {
    "name": "set_temp", "description": "Set the thermostat.",
    "parameters": {"type": "object", "properties": {
        "t": {"type": "number", "minimum": -10.0, "maximum": 40.0, "default": 20.0},
        "step": {"type": "number", "multipleOf": 0.5}}, "required": ["t"]}}}


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


CASES = [
    ([WEATHER], [{"role": "user", "content": "Weather in Paris?"}], True),
    ([WEATHER, THERMO], [{"role": "user", "content": "Set it to 21.5 degrees."}], True),
    ([WEATHER, SEARCH, NOPARAM], [{"role": "system", "content": "Be terse."},
                                  {"role": "user", "content": "Weather in Paris, and search \"cats\"."}], True),
    ([WEATHER, SEARCH], [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris"}),
                                                            call("get_weather", {"city": "Oslo", "unit": "C"})]},
        {"role": "tool", "content": "{\"t\": 21.5}"},
        {"role": "tool", "content": "{\"t\": -3}"},
        {"role": "assistant", "content": "Paris 21.5, Oslo -3."},
        {"role": "user", "content": "Thanks"}], True),
    ([SEARCH], [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "find x"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call("search", {"q": "x", "k": 3})]},
        {"role": "tool", "content": "nothing"}], True),
    # no tools offered, but a conversation that had calls (the template renders it all the same)
    ([], [{"role": "user", "content": "hi"},
          {"role": "assistant", "content": "", "tool_calls": [call("now", {})]},
          {"role": "tool", "content": "12:00"}], False),
]

cases = []
for tools, msgs, gen in CASES:
    out, _ = render_jinja_template(conversations=[msgs], tools=tools or None, chat_template=TEMPLATE,
                                   add_generation_prompt=gen)
    cases.append({"tools": [json.dumps(t, ensure_ascii=False) for t in tools],
                  "messages": [{"role": m["role"], "content": m["content"],
                                "tool_calls": [{"name": c["function"]["name"],
                                                "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)}
                                               for c in m.get("tool_calls", [])]} for m in msgs],
                  "gen": gen, "expect": out[0]})

PYJSON = ['{"a": 1, "b": [true, false, null], "c": {}}', '[]', '{"x": 0.1, "y": 1e-07, "z": 1.5e20, "w": 123456.789}',
          '{"big": 9007199254740991, "neg": -42, "f": -0.0001, "g": 2.5e-5, "h": 1e16, "i": 1.7976931348623157e308}',
          '{"s": "tab\\there \\"q\\" back\\\\slash \\u0001 \\u001f \\u007f / ünï 漢字 \\ud83d\\ude00"}',
          '{"nested": {"deep": [[1, 2], {"k": "v"}], "empty": []}, "order": {"z": 1, "a": 2}}',
          '3.14159', '"\\b\\f\\n\\r"', '[0.5, 100, -7.25e-10, 1.25e-3, 5e-324]']
# read from the text only (srv_pyjson_of_text; the parsed tree, srv_pyjson, keeps no int/float distinction and
# rounds integers past 2^53): float literals with an integer value, big integers, -0, escapes, whitespace
PYJSON_TEXT = ['{"t": 20.0, "e": 1E2, "f": -3.0e0, "z": -0, "zf": -0.0, "big": 123456789012345678901234567890}',
               ' [ 1.5E+3 , 2e-5 ,\n 1e400, -1e400, 0.0 ] ', '{"s": "\\u00e9\\ud83d\\ude00\\/\\u001f\\u007f", "": {}}']
pyjson = [{"in": t, "out": json.dumps(json.loads(t), ensure_ascii=False)} for t in PYJSON]
pyjson_text = [{"in": t, "out": json.dumps(json.loads(t), ensure_ascii=False)} for t in PYJSON_TEXT]

pyjson4 = [{"in": t, "out": json.dumps(json.loads(t), ensure_ascii=False, indent=4)} for t in PYJSON]
pyjson4_text = [{"in": t, "out": json.dumps(json.loads(t), ensure_ascii=False, indent=4)} for t in PYJSON_TEXT]

L31_CASES = [
    ([WEATHER], [{"role": "user", "content": " Weather in Paris? "}], True),
    ([THERMO], [{"role": "user", "content": "Set it to 21.5 degrees."}], True),
    ([WEATHER, SEARCH, NOPARAM], [
        {"role": "system", "content": " Be terse. "},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Oslo", "unit": "C"})]},
        {"role": "tool", "content": "{\"t\": -3, \"sky\": \"snow \u00e9\"}"},
        {"role": "assistant", "content": "It is -3 C."},
        {"role": "user", "content": "Thanks"}], True),
    ([], [{"role": "user", "content": "hi"},
          {"role": "assistant", "content": "", "tool_calls": [call("now", {})]},
          {"role": "tool", "content": "12:00\n"}], False),
]


def llama_case(tools, msgs):
    """a Llama 3.x case as the C renderer takes it: tools as json.dumps(indent=4), a tool's result as its JSON text"""
    return {"tools": [json.dumps(t, ensure_ascii=False, indent=4) for t in tools],
            "messages": [{"role": m["role"],
                          "content": json.dumps(m["content"], ensure_ascii=False) if m["role"] == "tool" else m["content"],
                          "tool_calls": [{"name": c["function"]["name"],
                                          "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)}
                                         for c in m.get("tool_calls", [])]} for m in msgs]}


l31 = []
for tools, msgs, gen in L31_CASES:
    out, _ = render_jinja_template(conversations=[msgs], tools=tools or None, chat_template=LLAMA31,
                                   add_generation_prompt=gen, bos_token="<|begin_of_text|>")
    l31.append(dict(llama_case(tools, msgs), gen=gen, expect=out[0]))

import datetime
l32 = []
for tools, msgs, gen in L31_CASES:
    for date in ("02 Jan 2025", None):
        kw = {"date_string": date} if date else {}
        today = datetime.datetime.now().strftime("%d %b %Y")
        out, _ = render_jinja_template(conversations=[msgs], tools=tools or None, chat_template=LLAMA32,
                                       add_generation_prompt=gen, bos_token="<|begin_of_text|>", **kw)
        assert ("Today Date: " + (date or today)) in out[0]
        l32.append(dict(llama_case(tools, msgs), gen=gen, date_string=date, today=None if date else today,
                        expect=out[0]))

# continue_final_message: the last message left open, as transformers cuts it (its tag after the message's text)
CONT = [("qwen25", TEMPLATE, [{"role": "user", "content": "Write a haiku."},
                              {"role": "assistant", "content": "Waves fold on the "}], {}),
        ("qwen25", TEMPLATE, [{"role": "system", "content": "s"}, {"role": "user", "content": "JSON?"},
                              {"role": "assistant", "content": "{\"a\":"}], {}),
        ("llama31", LLAMA31, [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " Hello there, "}], {}),
        ("qwen3", QWEN3, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "The answer is "}], {}),
        ("qwen3", QWEN3, [{"role": "user", "content": "q"},
                          {"role": "assistant", "content": "<think>\nhm\n</think>\n\nSo "}], {}),
        ("llama32", LLAMA32, [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes"}],
         {"date_string": "02 Jan 2025"}),
        ("deepseek_r1", R1, [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "It is "}], {})]
cont = []
for fam, tpl, msgs, kw in CONT:
    bos = {"llama31": "<|begin_of_text|>", "llama32": "<|begin_of_text|>",
           "deepseek_r1": "<\uff5cbegin\u2581of\u2581sentence\uff5c>"}.get(fam, "<|im_start|>")
    out, _ = render_jinja_template(conversations=[msgs], chat_template=tpl, continue_final_message=True,
                                   add_generation_prompt=False, bos_token=bos, **kw)
    cont.append({"family": fam, "messages": [dict(m, tool_calls=[]) for m in msgs], "gen": False,
                 "date_string": kw.get("date_string"), "expect": out[0]})

R1_CASES = [
    ([{"role": "user", "content": "What is 2+2?"}], True),
    ([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4"},
      {"role": "system", "content": "Be brief."}, {"role": "user", "content": " And 3+3? "},
      {"role": "assistant", "content": "a</think>b</think>6"}], False),
    ([{"role": "system", "content": "S1"}, {"role": "system", "content": "S2"}, {"role": "user", "content": "hi"}], True),
]
r1 = []
for msgs, gen in R1_CASES:
    out, _ = render_jinja_template(conversations=[msgs], chat_template=R1, add_generation_prompt=gen,
                                   bos_token="<\uff5cbegin\u2581of\u2581sentence\uff5c>")
    r1.append({"tools": [], "messages": [dict(m, tool_calls=[]) for m in msgs], "gen": gen, "expect": out[0]})

QWEN3_CASES = [
    ([], [{"role": "user", "content": "hi"}], True, None),
    ([], [{"role": "user", "content": "hi"}], True, True),
    ([], [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], True, False),
    # thinking of answers before the last query dropped; the last answer keeps its (stripped) thinking
    ([], [{"role": "system", "content": "S"}, {"role": "user", "content": "q1"},
          {"role": "assistant", "content": "<think>\nr1\n</think>\n\nA1"}, {"role": "user", "content": "q2"},
          {"role": "assistant", "content": "\n<think>\n\nr2 a</think>b\n</think>\n\nA2\n"}], False, None),
    # reasoning_content given apart; a message after the last query with no thinking and not last; system later on
    ([], [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "why"},
          {"role": "system", "content": "late"}, {"role": "user", "content": "q2"},
          {"role": "assistant", "content": "partial"}, {"role": "assistant", "content": "<think>x</think>",
                                                        "reasoning_content": "\nkept\n"}], True, False),
    # a tool loop after the query: the calls' thinking kept, tool results as user turns; a user turn that is a
    # wrapped tool response is not a query; a float argument with an integer value (json.dumps: 2.0)
    ([WEATHER, SEARCH], [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "<think>\nplan\n</think>\n\n", "tool_calls": [call("get_weather", {"city": "Paris"})]},
        {"role": "tool", "content": "{\"t\": 21.5}"},
        {"role": "assistant", "content": "More.", "reasoning_content": "r", "tool_calls": [
            call("search", {"q": "x", "k": 2.0}), call("get_weather", {"city": "Oslo", "unit": "C"})]},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "", "tool_calls": [call("search", {"q": "y", "k": 2})]},
        {"role": "tool", "content": "none"}], True, None),
    ([WEATHER], [{"role": "user", "content": "Weather?"}], True, False),
    # no query at all: every answer plain
    ([], [{"role": "assistant", "content": "<think>t</think>hello"}], True, None),
]
qwen3, qwen3t = [], []
for tools, msgs, gen, think in QWEN3_CASES:
    for tpl, dst in ((QWEN3, qwen3), (QWEN3T, qwen3t)):
        kw = {} if think is None else {"enable_thinking": think}
        out, _ = render_jinja_template(conversations=[msgs], tools=tools or None, chat_template=tpl,
                                       add_generation_prompt=gen, **kw)
        dst.append({"tools": [json.dumps(t, ensure_ascii=False) for t in tools],
                    "messages": [{"role": m["role"], "content": m["content"],
                                  **({"reasoning_content": m["reasoning_content"]} if "reasoning_content" in m else {}),
                                  "tool_calls": [{"name": c["function"]["name"],
                                                  "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)}
                                                 for c in m.get("tool_calls", [])]} for m in msgs],
                    "gen": gen, "enable_thinking": think, "expect": out[0]})

json.dump({"template": TEMPLATE, "cases": cases, "pyjson": pyjson, "pyjson_text": pyjson_text, "pyjson4": pyjson4, "pyjson4_text": pyjson4_text,
           "llama31": {"template": LLAMA31, "cases": l31}, "deepseek_r1": {"template": R1, "cases": r1},
           "continue": cont, "qwen3": {"template": QWEN3, "cases": qwen3}, "llama32": {"template": LLAMA32, "cases": l32}, "qwen3_thinking": {"template": QWEN3T, "cases": qwen3t}},
          open(OUT, "w"), ensure_ascii=False, indent=1)
print(f"wrote {OUT}: {len(cases)} conversations, {len(pyjson)} json.dumps cases")
