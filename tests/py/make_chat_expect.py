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

# ---- the [INST] formats (session 39): Llama 2 chat, Mistral 7B Instruct v0.1/v0.2 and v0.3 (its template without
# the tool-calling branches), with their own bos / eos and conversations their templates accept ----
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
          "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
          "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
          "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = "
          "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}"
          "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
           "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
           "{% endif %}{% endfor %}")
MISTRAL3 = ("{%- if messages[0][\"role\"] == \"system\" %}{%- set system_message = messages[0][\"content\"] %}"
            "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}"
            "{%- for message in loop_messages %}{%- if (message[\"role\"] == \"user\") != (loop.index0 % 2 == 0) %}"
            "{{- raise_exception(\"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...\") }}"
            "{%- endif %}{%- endfor %}{{- bos_token }}{%- for message in loop_messages %}{%- if message[\"role\"] == \"user\" %}"
            "{%- if loop.last and system_message is defined %}{{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}"
            "{%- else %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}{%- endif %}{%- elif message[\"role\"] == \"assistant\" %}"
            "{{- \" \" + message[\"content\"]|trim + eos_token}}{%- else %}{{- raise_exception(\"Only user and assistant roles are supported, "
            "with the exception of an initial optional system message!\") }}{%- endif %}{%- endfor %}")
INST_CONVS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "  And 3+3?  \n"}],
    [{"role": "user", "content": " padded "}, {"role": "assistant", "content": " ok \n"}, {"role": "user", "content": "x"}],
]
for name, tpl, convs in (("LLAMA2", LLAMA2, INST_CONVS), ("MISTRAL", MISTRAL, [INST_CONVS[0], INST_CONVS[2]]),
                         ("MISTRAL3", MISTRAL3, INST_CONVS)):
    print(f"static const char TPL_{name}[] = {c_str(tpl)};")
    print(f"static const char *const EXPECT_{name}[] = {{")
    for msgs in convs:
        out, _ = render_jinja_template(conversations=[msgs], chat_template=tpl, add_generation_prompt=True,
                                       bos_token="<s>", eos_token="</s>")
        print(f"    {c_str(out[0])},")
    print("};")
