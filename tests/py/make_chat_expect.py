#!/usr/bin/env python3
"""Render the chat templates tests/test_tokenizer.c checks with transformers' Jinja
renderer and print them as C string literals (pasted into the test's chat table).

    /opt/refenv/bin/python tests/py/make_chat_expect.py"""
import json

from transformers.utils.chat_template_utils import render_jinja_template

SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
           "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
           "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN25 = ("{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
          "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
          "{%- endif %}{%- for message in messages %}{%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first)"
          " or (message.role == \"assistant\") %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
          "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
LLAMA31 = ("{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
           "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}"
           "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = \"\" %}{%- endif %}"
           "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
           "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}{{- system_message }}{{- \"<|eot_id|>\" }}"
           "{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
           "message['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}"
           "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")

TEMPLATES = [("SMOLLM2", SMOLLM2), ("QWEN25", QWEN25), ("CHATML", CHATML), ("LLAMA3", LLAMA3), ("LLAMA31", LLAMA31)]
CONVS = [
    ([{"role": "user", "content": "Hi"}], True),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
      {"role": "assistant", "content": "4"}, {"role": "user", "content": "  And 3+3?  \n"}], True),
    ([{"role": "user", "content": " padded "}], False),
]


def c_str(s):
    return json.dumps(s, ensure_ascii=False)


for name, tpl in TEMPLATES:
    print(f"static const char TPL_{name}[] = {c_str(tpl)};")
for name, tpl in TEMPLATES:
    print(f"static const char *const EXPECT_{name}[] = {{")
    for msgs, gen in CONVS:
        out, _ = render_jinja_template(conversations=[msgs], chat_template=tpl, add_generation_prompt=gen,
                                       bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
        print(f"    {c_str(out[0])},")
    print("};")
