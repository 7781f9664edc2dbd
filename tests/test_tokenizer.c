/* label: unit */
/* Tokenizer unit tests: the byte mapping, BPE merge order on hand-built vocabularies,
 * added tokens, streaming decode, chat rendering (expected strings rendered by
 * transformers' Jinja renderer, tests/py/make_chat_expect.py), corrupt GGUF and
 * tokenizer.json inputs, invalid UTF-8 round trips, speed, concurrent encode, and
 * that nothing leaks. The golden comparison with Hugging Face tokenizers over a
 * corpus is tests/sh/test_tokenizer_ref.sh. */
#include "oasiskv/gguf.h"
#include "oasiskv/tokenizer.h"
#include "tokenizer/tok_internal.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_fail, g_checks;
#define CHECK(cond, ...) do { g_checks++; if (!(cond)) { g_fail++; \
    printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); printf(__VA_ARGS__); printf("\n"); } } while (0)

static char g_tmp[64];
static char g_src[1024];

static void path_in_tmp(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_tmp, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

/* Byte-level form of raw bytes. */
static char *bl(const char *raw)
{
    static char buf[8][256];
    static int k;
    char *o = buf[k++ & 7];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++)
        n += (size_t)okv_utf8_encode(okv_tok_byte_to_cp(*p), o + n);
    o[n] = '\0';
    return o;
}

/* ---- hand-built tokenizer.json: ids 0..255 are the bytes, then extras ---- */

struct tiny {
    const char *extras[16];         /* raw strings, ids 256.. */
    const char *merges[16][2];      /* raw pairs, in rank order */
    const char *added[8];           /* raw text, ids after the extras */
    bool added_special[8];
    const char *pretok;             /* pre_tokenizer JSON, NULL = GPT-2 ByteLevel */
};

static cJSON *tiny_json(const struct tiny *d)
{
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *merges = cJSON_CreateArray(), *added = cJSON_CreateArray();
    int id = 0;
    for (int b = 0; b < 256; b++) {
        char o[4] = { 0 };
        okv_utf8_encode(okv_tok_byte_to_cp((uint8_t)b), o);
        cJSON_AddNumberToObject(vocab, o, id++);
    }
    for (int i = 0; i < 16 && d->extras[i]; i++)
        cJSON_AddNumberToObject(vocab, bl(d->extras[i]), id++);
    for (int i = 0; i < 16 && d->merges[i][0]; i++) {
        char m[512];
        snprintf(m, sizeof(m), "%s %s", bl(d->merges[i][0]), bl(d->merges[i][1]));
        cJSON_AddItemToArray(merges, cJSON_CreateString(m));
    }
    for (int i = 0; i < 8 && d->added[i]; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", id++);
        cJSON_AddStringToObject(a, "content", d->added[i]);
        cJSON_AddBoolToObject(a, "special", d->added_special[i]);
        cJSON_AddItemToArray(added, a);
    }
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "added_tokens", added);
    cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_Parse(d->pretok ? d->pretok :
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}"));
    cJSON_AddItemToObject(root, "model", model);
    return root;
}

static void write_json(const char *path, const cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    write_text(path, s);
    free(s);
}

static okv_tokenizer *load_tiny(const struct tiny *d)
{
    char path[256];
    path_in_tmp(path, sizeof(path), "tiny.json");
    cJSON *j = tiny_json(d);
    write_json(path, j);
    cJSON_Delete(j);
    okv_tokenizer *t = NULL;
    enum okv_status st = okv_tokenizer_from_json_file(path, &t);
    CHECK(st == OKV_OK, "load tiny: %s", okv_last_error());
    return t;
}

/* Encode and compare with the expected ids (terminated by -1). */
static void expect_ids(const okv_tokenizer *t, const char *text, size_t len, bool special, const int32_t *want,
                       const char *what)
{
    int32_t *ids;
    size_t n, nw = 0;
    while (want[nw] >= 0)
        nw++;
    enum okv_status st = okv_tokenizer_encode(t, text, len, false, special, &ids, &n);
    CHECK(st == OKV_OK, "%s: %s", what, okv_last_error());
    if (st != OKV_OK)
        return;
    bool eq = n == nw && memcmp(ids, want, n * sizeof(int32_t)) == 0;
    char got[512] = "";
    for (size_t i = 0; i < n && strlen(got) < 480; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%d ", ids[i]);
    CHECK(eq, "%s: got [%s] (%zu ids, want %zu)", what, got, n, nw);
    okv_free(ids);
}

static void test_byte_mapping(void)
{
    CHECK(okv_tok_byte_to_cp(' ') == 0x120, "space");
    CHECK(okv_tok_byte_to_cp('\n') == 0x10A, "newline");
    CHECK(okv_tok_byte_to_cp('\t') == 0x109, "tab");
    CHECK(okv_tok_byte_to_cp(0) == 0x100, "NUL");
    CHECK(okv_tok_byte_to_cp('A') == 'A' && okv_tok_byte_to_cp('!') == '!' && okv_tok_byte_to_cp('~') == '~', "ascii");
    CHECK(okv_tok_byte_to_cp(0x7F) == 0x121, "DEL");
    CHECK(okv_tok_byte_to_cp(0xA0) == 0x142, "NBSP");
    CHECK(okv_tok_byte_to_cp(0xAD) == 0x143, "soft hyphen");
    CHECK(okv_tok_byte_to_cp(0xA1) == 0xA1 && okv_tok_byte_to_cp(0xFF) == 0xFF, "latin-1");
    bool seen[324] = { false }, ok = true;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = okv_tok_byte_to_cp((uint8_t)b);
        if (cp >= 324 || seen[cp] || okv_tok_cp_to_byte(cp) != b)
            ok = false;
        else
            seen[cp] = true;
    }
    CHECK(ok, "bytes_to_unicode is a bijection onto 256 code points below U+0144");
    CHECK(okv_tok_cp_to_byte(' ') == -1 && okv_tok_cp_to_byte(0x144) == -1 && okv_tok_cp_to_byte(0x4E2D) == -1,
          "code points outside the map");
}

static void test_merges(void)
{
    /* b+c has the lowest rank, so "abc" -> a|bc -> abc, although a+b comes first. */
    struct tiny d1 = { .extras = { "ab", "bc", "abc" }, .merges = { { "b", "c" }, { "a", "b" }, { "a", "bc" } } };
    okv_tokenizer *t = load_tiny(&d1);
    if (t) {
        expect_ids(t, "abc", 3, false, (int32_t[]){ 258, -1 }, "rank order b c first");
        expect_ids(t, "abcab", 5, false, (int32_t[]){ 258, 256, -1 }, "abcab");
        okv_tokenizer_free(t);
    }
    struct tiny d2 = { .extras = { "ab", "bc", "abc" }, .merges = { { "a", "b" }, { "b", "c" } } };
    t = load_tiny(&d2);
    if (t) {
        expect_ids(t, "abc", 3, false, (int32_t[]){ 256, 'c', -1 }, "rank order a b first");
        okv_tokenizer_free(t);
    }
    /* Ties (the same pair twice): leftmost first. */
    struct tiny d3 = { .extras = { "aa", "aaaa", " a" }, .merges = { { "a", "a" }, { "aa", "aa" }, { " ", "a" } } };
    t = load_tiny(&d3);
    if (t) {
        CHECK(okv_tokenizer_pretok(t) == OKV_PRETOK_GPT2, "ByteLevel -> GPT-2");
        expect_ids(t, "aaa", 3, false, (int32_t[]){ 256, 'a', -1 }, "aaa -> aa a");
        expect_ids(t, "aaaa", 4, false, (int32_t[]){ 257, -1 }, "aaaa");
        expect_ids(t, "aaaaa", 5, false, (int32_t[]){ 257, 'a', -1 }, "aaaaa");
        expect_ids(t, "aaaaaaa", 7, false, (int32_t[]){ 257, 256, 'a', -1 }, "a*7");
        /* GPT-2 pre-tokenizer: " a" is one piece, so " " and "a" merge; "a a" -> a| a. */
        expect_ids(t, "a a", 3, false, (int32_t[]){ 'a', 258, -1 }, "a a");
        expect_ids(t, "", 0, false, (int32_t[]){ -1 }, "empty");
        okv_tokenizer_free(t);
    }
    /* Merges as 2-element arrays (newer tokenizer.json) give the same result. */
    cJSON *j = tiny_json(&d1);
    cJSON *model = cJSON_GetObjectItem(j, "model");
    cJSON *arr = cJSON_CreateArray();
    const char *pairs[3][2] = { { "b", "c" }, { "a", "b" }, { "a", "bc" } };
    for (int i = 0; i < 3; i++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateString(pairs[i][0]));
        cJSON_AddItemToArray(p, cJSON_CreateString(pairs[i][1]));
        cJSON_AddItemToArray(arr, p);
    }
    cJSON_ReplaceItemInObject(model, "merges", arr);
    char path[256];
    path_in_tmp(path, sizeof(path), "arr.json");
    write_json(path, j);
    cJSON_Delete(j);
    CHECK(okv_tokenizer_from_json_file(path, &t) == OKV_OK, "array merges: %s", okv_last_error());
    if (t) {
        expect_ids(t, "abc", 3, false, (int32_t[]){ 258, -1 }, "array merges");
        okv_tokenizer_free(t);
    }
}

static void test_added_tokens(void)
{
    struct tiny d = { .extras = { "ab" }, .merges = { { "a", "b" } },
                      .added = { "<|im_start|>", "<|im", "<x>" }, .added_special = { true, true, false } };
    okv_tokenizer *t = load_tiny(&d);
    if (!t)
        return;
    const char *s = "a<|im_start|>b<|imc<x>ab";
    expect_ids(t, s, strlen(s), true, (int32_t[]){ 'a', 257, 'b', 258, 'c', 259, 256, -1 },
               "parse_special: longest first");
    expect_ids(t, s, strlen(s), false,
               (int32_t[]){ 'a', '<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't', '|', '>', 'b', '<', '|', 'i', 'm',
                            'c', 259, 256, -1 },
               "special as text, <x> (not special) still matched");
    char *out;
    size_t len;
    int32_t ids[] = { 256, 257, 259, 'z' };
    CHECK(okv_tokenizer_decode(t, ids, 4, false, &out, &len) == OKV_OK && strcmp(out, "ab<|im_start|><x>z") == 0,
          "decode with specials: %s", out);
    okv_free(out);
    CHECK(okv_tokenizer_decode(t, ids, 4, true, &out, &len) == OKV_OK && strcmp(out, "ab<x>z") == 0,
          "decode skipping specials: %s", out);
    okv_free(out);
    int32_t bad = 9999;
    CHECK(okv_tokenizer_decode(t, &bad, 1, false, &out, &len) == OKV_ERR_INVALID_ARG, "decode out of range");
    CHECK(okv_tokenizer_token_str(t, -1) == NULL && okv_tokenizer_token_str(t, 260) == NULL, "token_str range");
    CHECK(strcmp(okv_tokenizer_token_str(t, ' '), "\xc4\xa0") == 0, "token_str is byte-level");
    CHECK(okv_tokenizer_bos(t) == -1 && !okv_tokenizer_add_bos(t), "no bos");
    okv_tokenizer_free(t);
}

static int push_str(const okv_tokenizer *t, struct okv_detok *d, const char *bytes, char *acc)
{
    char out[64];
    int total = 0;
    for (const unsigned char *p = (const unsigned char *)bytes; *p; p++) {
        int n = okv_detok_push(t, d, *p, false, out, sizeof(out));   /* ids 0..255 are bytes */
        if (n < 0)
            return -1;
        strcat(acc, out);
        total += n;
    }
    return total;
}

static void test_detok(void)
{
    struct tiny d = { .extras = { "ab" }, .merges = { { "a", "b" } } };
    okv_tokenizer *t = load_tiny(&d);
    if (!t)
        return;
    struct okv_detok dt = { 0 };
    char out[64];
    /* U+1F642 split over four tokens: nothing until the last byte. */
    const unsigned char emoji[4] = { 0xF0, 0x9F, 0x99, 0x82 };
    for (int i = 0; i < 3; i++)
        CHECK(okv_detok_push(t, &dt, emoji[i], false, out, sizeof(out)) == 0 && out[0] == 0, "partial %d", i);
    CHECK(dt.n_pending == 3, "three pending");
    CHECK(okv_detok_push(t, &dt, emoji[3], false, out, 4) == -1 && dt.n_pending == 3, "cap too small keeps state");
    CHECK(okv_detok_push(t, &dt, emoji[3], false, out, sizeof(out)) == 4 && strcmp(out, "\xF0\x9F\x99\x82") == 0,
          "whole emoji");
    CHECK(okv_detok_flush(&dt, out, sizeof(out)) == 0, "nothing to flush");

    static const struct { const char *in, *want; } cases[] = {
        { "\xFF" "a", "\xEF\xBF\xBD" "a" },                        /* never valid */
        { "\xF0" "b", "\xEF\xBF\xBD" "b" },                        /* truncated then ASCII */
        { "\xC3(", "\xEF\xBF\xBD(" },
        { "\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" }, /* surrogate: 3 subparts */
        { "\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD" },                /* overlong */
        { "\xE2\x82\xAC\xE2\x82", "\xE2\x82\xAC" },                /* euro, then pending */
        { "ab\xC3\xA9", "ab\xC3\xA9" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct okv_detok s = { 0 };
        char acc[128] = "";
        push_str(t, &s, cases[i].in, acc);
        CHECK(strcmp(acc, cases[i].want) == 0, "stream case %zu", i);
        if (i == 5) {
            CHECK(s.n_pending == 2, "two pending");
            CHECK(okv_detok_flush(&s, out, sizeof(out)) == 3 && strcmp(out, "\xEF\xBF\xBD") == 0 && s.n_pending == 0,
                  "flush pending as U+FFFD");
        }
    }
    /* A multi-byte token followed by the start of a character. */
    struct okv_detok s2 = { 0 };
    CHECK(okv_detok_push(t, &s2, 256, false, out, sizeof(out)) == 2 && strcmp(out, "ab") == 0, "token ab");
    okv_tokenizer_free(t);
}

/* Generated by tests/py/make_chat_expect.py (transformers' render_jinja_template). */
static const char TPL_SMOLLM2[] = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
static const char TPL_QWEN25[] = "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\") %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
static const char TPL_CHATML[] = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char TPL_LLAMA3[] = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
static const char TPL_LLAMA31[] = "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}{%- set messages = messages[1:] %}{%- else %}{%- set system_message = \"\" %}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}{{- \"Today Date: \" + date_string + \"\\n\\n\" }}{{- system_message }}{{- \"<|eot_id|>\" }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
static const char *const EXPECT_SMOLLM2[] = {
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\n  And 3+3?  \n<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n padded <|im_end|>\n",
};
static const char *const EXPECT_QWEN25[] = {
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\n  And 3+3?  \n<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\n padded <|im_end|>\n",
};
static const char *const EXPECT_CHATML[] = {
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\n  And 3+3?  \n<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\n padded <|im_end|>\n",
};
static const char *const EXPECT_LLAMA3[] = {
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|>",
};
static const char *const EXPECT_LLAMA31[] = {
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|>",
};

/* Generated by tests/py/make_chat_expect.py, its [INST] part (session 39). */
static const char TPL_LLAMA2[] = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
static const char *const EXPECT_LLAMA2[] = {
    "<s>[INST] Hi [/INST]",
    "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nWhat is 2+2? [/INST] 4 </s><s>[INST] And 3+3? [/INST]",
    "<s>[INST] padded [/INST] ok </s><s>[INST] x [/INST]",
};
static const char TPL_MISTRAL[] = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";
static const char *const EXPECT_MISTRAL[] = {
    "<s>[INST] Hi [/INST]",
    "<s>[INST]  padded  [/INST] ok \n</s>[INST] x [/INST]",
};
static const char TPL_MISTRAL3[] = "{%- if messages[0][\"role\"] == \"system\" %}{%- set system_message = messages[0][\"content\"] %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}{%- for message in loop_messages %}{%- if (message[\"role\"] == \"user\") != (loop.index0 % 2 == 0) %}{{- raise_exception(\"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...\") }}{%- endif %}{%- endfor %}{{- bos_token }}{%- for message in loop_messages %}{%- if message[\"role\"] == \"user\" %}{%- if loop.last and system_message is defined %}{{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}{%- else %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}{%- endif %}{%- elif message[\"role\"] == \"assistant\" %}{{- \" \" + message[\"content\"]|trim + eos_token}}{%- else %}{{- raise_exception(\"Only user and assistant roles are supported, with the exception of an initial optional system message!\") }}{%- endif %}{%- endfor %}";
static const char *const EXPECT_MISTRAL3[] = {
    "<s>[INST] Hi[/INST]",
    "<s>[INST] What is 2+2?[/INST] 4</s>[INST] Be brief.\n\n  And 3+3?  \n[/INST]",
    "<s>[INST]  padded [/INST] ok</s>[INST] x[/INST]",
};

/* A tiny tokenizer with the chat tokens in dir, with template tpl and the bos / eos of a family: 0 ChatML, 1 Llama 3,
 * 2 DeepSeek-R1 */
static okv_tokenizer *chat_tok(const char *dir, const char *tpl, int fam)
{
    char path[300];
    const bool llama = fam == 1 || fam == 5;
    struct tiny d = { .added = { "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
                                 "<|end_header_id|>", "<|eot_id|>", fam == 2 ? "<｜begin▁of▁sentence｜>" : NULL,
                                 fam == 2 ? "<｜end▁of▁sentence｜>" : NULL },
                      .added_special = { true, true, true, true, true, true, true, true } };
    cJSON *j = tiny_json(&d);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    write_json(path, j);
    cJSON_Delete(j);
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "chat_template", tpl);
    cJSON_AddStringToObject(cfg, "bos_token", fam == 2 ? "<｜begin▁of▁sentence｜>" : llama ? "<|begin_of_text|>" : "<|im_start|>");
    cJSON_AddStringToObject(cfg, "eos_token", fam == 2 ? "<｜end▁of▁sentence｜>" : llama ? "<|eot_id|>" : "<|im_end|>");
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    write_json(path, cfg);
    cJSON_Delete(cfg);
    okv_tokenizer *t = NULL;
    return okv_tokenizer_from_hf_dir(dir, &t) == OKV_OK ? t : NULL;
}

static void test_chat(void)
{
    static const struct { const char *name; const char *tpl; const char *const *expect; enum okv_chat_format fmt; } tpls[] = {
        { "smollm2", TPL_SMOLLM2, EXPECT_SMOLLM2, OKV_CHAT_FORMAT_CHATML },
        { "qwen2.5", TPL_QWEN25, EXPECT_QWEN25, OKV_CHAT_FORMAT_CHATML },
        { "chatml", TPL_CHATML, EXPECT_CHATML, OKV_CHAT_FORMAT_CHATML },
        { "llama3", TPL_LLAMA3, EXPECT_LLAMA3, OKV_CHAT_FORMAT_LLAMA3 },
        { "llama3.1", TPL_LLAMA31, EXPECT_LLAMA31, OKV_CHAT_FORMAT_LLAMA3 },
    };
    const struct okv_chat_msg c0[] = { { .role = "user", .content = "Hi" } };
    const struct okv_chat_msg c1[] = { { .role = "system", .content = "Be brief." }, { .role = "user", .content = "What is 2+2?" }, { .role = "assistant", .content = "4" },
                                       { .role = "user", .content = "  And 3+3?  \n" } };
    const struct okv_chat_msg c2[] = { { .role = "user", .content = " padded " } };
    const struct { const struct okv_chat_msg *m; size_t n; bool gen; } convs[] = { { c0, 1, true }, { c1, 4, true }, { c2, 1, false } };

    char dir[256], path[300];
    path_in_tmp(dir, sizeof(dir), "chatdir");
    snprintf(path, sizeof(path), "mkdir -p '%s'", dir);
    if (system(path) != 0) { printf("mkdir failed\n"); exit(1); }
    for (size_t k = 0; k < sizeof(tpls) / sizeof(tpls[0]); k++) {
        bool llama = tpls[k].fmt == OKV_CHAT_FORMAT_LLAMA3;
        okv_tokenizer *t = chat_tok(dir, tpls[k].tpl, llama ? 1 : 0);
        CHECK(t != NULL, "%s: %s", tpls[k].name, okv_last_error());
        if (!t)
            continue;
        CHECK(okv_tokenizer_chat_format(t) == tpls[k].fmt, "%s: format", tpls[k].name);
        CHECK(okv_tokenizer_eos(t) == (llama ? 261 : 257), "%s: eos from tokenizer_config.json", tpls[k].name);
        CHECK(okv_tokenizer_is_eog(t, 257) && okv_tokenizer_is_eog(t, 261) && !okv_tokenizer_is_eog(t, 256) &&
              !okv_tokenizer_is_eog(t, 'a') && !okv_tokenizer_is_eog(t, -1), "%s: eog", tpls[k].name);
        for (size_t c = 0; c < 3; c++) {
            char *out = NULL;
            enum okv_status st = okv_tokenizer_apply_chat(t, convs[c].m, convs[c].n, convs[c].gen, &out);
            CHECK(st == OKV_OK && strcmp(out, tpls[k].expect[c]) == 0, "%s conversation %zu:\n got  [%s]\n want [%s]",
                  tpls[k].name, c, out ? out : "(null)", tpls[k].expect[c]);
            okv_free(out);
        }
        okv_tokenizer_free(t);
    }
    /* The [INST] formats: Llama 2 chat, Mistral 7B Instruct v0.1 / v0.2 and v0.3, against their templates */
    {
        static const struct { const char *name; const char *tpl; const char *const *expect; enum okv_chat_format fmt;
                              int n_conv; int conv[3]; } inst[] = {
            { "llama2", TPL_LLAMA2, EXPECT_LLAMA2, OKV_CHAT_FORMAT_LLAMA2, 3, { 0, 1, 2 } },
            { "mistral v0.1", TPL_MISTRAL, EXPECT_MISTRAL, OKV_CHAT_FORMAT_MISTRAL, 2, { 0, 2 } },
            { "mistral v0.3", TPL_MISTRAL3, EXPECT_MISTRAL3, OKV_CHAT_FORMAT_MISTRAL3, 3, { 0, 1, 2 } },
        };
        const struct okv_chat_msg i2[] = { { .role = "user", .content = " padded " }, { .role = "assistant", .content = " ok \n" }, { .role = "user", .content = "x" } };
        const struct { const struct okv_chat_msg *m; size_t n; } iconv[] = { { c0, 1 }, { c1, 4 }, { i2, 3 } };
        for (size_t k = 0; k < sizeof(inst) / sizeof(inst[0]); k++) {
            struct tiny d = { .added = { "<s>", "</s>", "[INST]", "[/INST]" }, .added_special = { true, true, true, true } };
            cJSON *j = tiny_json(&d);
            snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
            write_json(path, j);
            cJSON_Delete(j);
            cJSON *cfg = cJSON_CreateObject();
            cJSON_AddStringToObject(cfg, "chat_template", inst[k].tpl);
            cJSON_AddStringToObject(cfg, "bos_token", "<s>");
            cJSON_AddStringToObject(cfg, "eos_token", "</s>");
            snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
            write_json(path, cfg);
            cJSON_Delete(cfg);
            okv_tokenizer *ti = NULL;
            CHECK(okv_tokenizer_from_hf_dir(dir, &ti) == OKV_OK, "%s: %s", inst[k].name, okv_last_error());
            if (!ti)
                continue;
            CHECK(okv_tokenizer_chat_format(ti) == inst[k].fmt, "%s: format %d", inst[k].name, okv_tokenizer_chat_format(ti));
            for (int c = 0; c < inst[k].n_conv; c++) {
                char *o = NULL;
                const int ci = inst[k].conv[c];
                enum okv_status st = okv_tokenizer_apply_chat(ti, iconv[ci].m, iconv[ci].n, true, &o);
                CHECK(st == OKV_OK && strcmp(o, inst[k].expect[c]) == 0, "%s conversation %d:\n got  [%s]\n want [%s]",
                      inst[k].name, ci, o ? o : "(null)", inst[k].expect[c]);
                okv_free(o);
            }
            /* roles that do not alternate: refused, as the templates raise */
            const struct okv_chat_msg bad[] = { { .role = "user", .content = "a" }, { .role = "user", .content = "b" } };
            char *o = NULL;
            CHECK(okv_tokenizer_apply_chat(ti, bad, 2, true, &o) == OKV_ERR_INVALID_ARG && !o &&
                      strstr(okv_last_error(), "alternat"), "%s: two user turns in a row: %s", inst[k].name, okv_last_error());
            okv_tokenizer_free(ti);
        }
    }
    /* Tools: Qwen2.5's template (tests/data/chat_tools.json, rendered by transformers with tools, tool calls and
     * tool results: tests/py/make_chat_tools_expect.py) */
    {
        snprintf(path, sizeof(path), "%s/tests/data/chat_tools.json",
                 getenv("OKV_SOURCE_DIR") ? getenv("OKV_SOURCE_DIR") : ".");
        cJSON *root = NULL;
        FILE *fx = fopen(path, "rb");
        if (fx) {
            static char buf[1 << 17];
            const size_t got = fread(buf, 1, sizeof buf - 1, fx);
            buf[got] = 0;
            fclose(fx);
            root = cJSON_Parse(buf);
        }
        CHECK(root != NULL, "read %s", path);
        static const char *const fam_name[6] = {"qwen2.5", "llama3.1", "deepseek-r1", "qwen3", "qwen3-thinking",
                                                "llama3.2"};
        static const char *const fam_key[6] = {NULL, "llama31", "deepseek_r1", "qwen3", "qwen3_thinking", "llama32"};
        /* Qwen2.5 (Hermes), Llama 3.1, DeepSeek-R1 (no tools), Qwen3 (Hermes; thinking kept after the last query,
         * enable_thinking), Qwen3 with a generation prompt opening <think>, Llama 3.2 (today's date, or date_string) */
        int n_continued = 0;
        for (int fam = 0; fam < 6 && root; fam++) {
        const cJSON *fx = fam == 0 ? root : cJSON_GetObjectItem(root, fam_key[fam]);
        okv_tokenizer *tq = chat_tok(dir, cJSON_GetObjectItem(fx, "template")->valuestring, fam);
        CHECK(tq != NULL, "%s: %s", fam_name[fam], okv_last_error());
        if (tq) {
            static const enum okv_chat_format fmts[6] = {OKV_CHAT_FORMAT_CHATML, OKV_CHAT_FORMAT_LLAMA3,
                                                         OKV_CHAT_FORMAT_DEEPSEEK_R1, OKV_CHAT_FORMAT_CHATML,
                                                         OKV_CHAT_FORMAT_CHATML, OKV_CHAT_FORMAT_LLAMA3};
            static const enum okv_chat_tools tfs[6] = {OKV_CHAT_TOOLS_HERMES, OKV_CHAT_TOOLS_LLAMA31, OKV_CHAT_TOOLS_NONE,
                                                       OKV_CHAT_TOOLS_HERMES, OKV_CHAT_TOOLS_HERMES,
                                                       OKV_CHAT_TOOLS_LLAMA31};
            CHECK(okv_tokenizer_chat_format(tq) == fmts[fam] && okv_tokenizer_chat_tools(tq) == tfs[fam] &&
                  okv_tokenizer_chat_thinking_switch(tq) == (fam == 3),
                  "%s: its format, tool format and thinking switch", fam_name[fam]);
            const cJSON *cs;
            int ci = 0;
            cJSON_ArrayForEach(cs, cJSON_GetObjectItem(fx, "cases")) {
                const cJSON *tl = cJSON_GetObjectItem(cs, "tools"), *ms = cJSON_GetObjectItem(cs, "messages");
                const char *tools[8];
                struct okv_chat_msg m[16];
                struct okv_chat_tool_call calls[16][4];
                int nt = 0, nm = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, tl) tools[nt++] = x->valuestring;
                cJSON_ArrayForEach(x, ms) {
                    const cJSON *rc = cJSON_GetObjectItem(x, "reasoning_content");
                    m[nm] = (struct okv_chat_msg){ .role = cJSON_GetObjectItem(x, "role")->valuestring,
                                                   .content = cJSON_GetObjectItem(x, "content")->valuestring,
                                                   .tool_calls = calls[nm],
                                                   .reasoning_content = rc ? rc->valuestring : NULL };
                    const cJSON *c;
                    cJSON_ArrayForEach(c, cJSON_GetObjectItem(x, "tool_calls")) {
                        calls[nm][m[nm].n_tool_calls++] = (struct okv_chat_tool_call){
                            cJSON_GetObjectItem(c, "name")->valuestring, cJSON_GetObjectItem(c, "arguments")->valuestring };
                    }
                    nm++;
                }
                char *o = NULL;
                const char *want = cJSON_GetObjectItem(cs, "expect")->valuestring;
                const cJSON *think = cJSON_GetObjectItem(cs, "enable_thinking");
                struct okv_chat_opts opts = {
                    .tools = tools, .n_tools = (size_t)nt, .add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(cs, "gen")),
                    .enable_thinking = cJSON_IsBool(think) ? cJSON_IsTrue(think) : -1 };
                const cJSON *date = cJSON_GetObjectItem(cs, "date_string"), *today = cJSON_GetObjectItem(cs, "today");
                if (cJSON_IsString(date))
                    snprintf(opts.date_string, sizeof opts.date_string, "%s", date->valuestring);
                char want_today[8192];   /* rendered without date_string: transformers' today, here ours */
                if (cJSON_IsString(today)) {
                    char now[32];
                    const time_t tt = time(NULL);
                    strftime(now, sizeof now, "%d %b %Y", localtime(&tt));
                    const char *at = strstr(want, today->valuestring);
                    CHECK(at != NULL, "%s conversation %d: the fixture's date", fam_name[fam], ci);
                    if (at) {
                        snprintf(want_today, sizeof want_today, "%.*s%s%s", (int)(at - want), want, now,
                                 at + strlen(today->valuestring));
                        want = want_today;
                    }
                }
                enum okv_status st = okv_tokenizer_render_chat(tq, m, (size_t)nm, &opts, &o);
                CHECK(st == OKV_OK && o && strcmp(o, want) == 0, "%s conversation %d (%s):\n got  [%s]\n want [%s]",
                      fam_name[fam], ci, okv_last_error(), o ? o : "(null)", want);
                okv_free(o);
                ci++;
            }
            static const int n_cases[6] = {6, 4, 3, 8, 8, 8};
            CHECK(ci == n_cases[fam], "%s: the fixture's conversations: %d", fam_name[fam], ci);
            /* continue_final_message: the family's conversations left open, as transformers cuts them */
            const char *key = fam_key[fam] ? fam_key[fam] : "qwen25";
            cJSON_ArrayForEach(cs, cJSON_GetObjectItem(root, "continue")) {
                if (strcmp(cJSON_GetObjectItem(cs, "family")->valuestring, key) != 0)
                    continue;
                struct okv_chat_msg m[8];
                int nm = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, cJSON_GetObjectItem(cs, "messages"))
                    m[nm++] = (struct okv_chat_msg){ .role = cJSON_GetObjectItem(x, "role")->valuestring,
                                                     .content = cJSON_GetObjectItem(x, "content")->valuestring };
                struct okv_chat_opts opts = { .enable_thinking = -1, .continue_final_message = true };
                const cJSON *date = cJSON_GetObjectItem(cs, "date_string");
                if (cJSON_IsString(date))
                    snprintf(opts.date_string, sizeof opts.date_string, "%s", date->valuestring);
                char *o = NULL;
                const char *want = cJSON_GetObjectItem(cs, "expect")->valuestring;
                const enum okv_status st = okv_tokenizer_render_chat(tq, m, (size_t)nm, &opts, &o);
                CHECK(st == OKV_OK && o && !strcmp(o, want), "%s continued (%s):\n got  [%s]\n want [%s]", fam_name[fam],
                      okv_last_error(), o ? o : "(null)", want);
                okv_free(o);
                n_continued++;
            }
            if (fam == 1) {   /* two calls in one turn, and tools with nothing after the system message: refused */
                const struct okv_chat_tool_call two[2] = { { "f", "{}" }, { "g", "{}" } };
                const struct okv_chat_msg m2[] = { { .role = "user", .content = "x" },
                                                   { .role = "assistant", .content = "", .tool_calls = two, .n_tool_calls = 2 } };
                const struct okv_chat_msg sys[] = { { .role = "system", .content = "s" } };
                const char *tool = "{}";
                char *o = NULL;
                CHECK(okv_tokenizer_apply_chat(tq, m2, 2, true, &o) == OKV_ERR_UNSUPPORTED && !o &&
                      strstr(okv_last_error(), "one a message"), "two calls refused: %s", okv_last_error());
                CHECK(okv_tokenizer_apply_chat_tools(tq, sys, 1, &tool, 1, true, &o) == OKV_ERR_INVALID_ARG && !o &&
                      strstr(okv_last_error(), "first message"), "no first message refused: %s", okv_last_error());
            }
        }
        okv_tokenizer_free(tq);
        }
        CHECK(n_continued == 7, "continued conversations: %d", n_continued);
        cJSON_Delete(root);
        /* a template without tools: tools, tool calls and tool results are refused, naming the problem */
        okv_tokenizer *tn = load_tiny(&(struct tiny){ .added = { "<|im_start|>", "<|im_end|>" },
                                                      .added_special = { true, true } });
        if (tn) {
            CHECK(okv_tokenizer_chat_tools(tn) == OKV_CHAT_TOOLS_NONE, "guessed ChatML: no tools");
            const char *tool = "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}";
            const struct okv_chat_tool_call tc = { "f", "{}" };
            const struct okv_chat_msg withcall[] = { { .role = "user", .content = "x" },
                                                     { .role = "assistant", .content = "", .tool_calls = &tc, .n_tool_calls = 1 } };
            const struct okv_chat_msg result[] = { { .role = "tool", .content = "1" } };
            char *o = NULL;
            CHECK(okv_tokenizer_apply_chat_tools(tn, withcall, 1, &tool, 1, true, &o) == OKV_ERR_UNSUPPORTED && !o &&
                  strstr(okv_last_error(), "does not render tools"), "tools refused: %s", okv_last_error());
            CHECK(okv_tokenizer_apply_chat(tn, withcall, 2, true, &o) == OKV_ERR_UNSUPPORTED && !o &&
                  strstr(okv_last_error(), "tool calls"), "a tool call refused: %s", okv_last_error());
            CHECK(okv_tokenizer_apply_chat(tn, result, 1, true, &o) == OKV_ERR_UNSUPPORTED && !o &&
                  strstr(okv_last_error(), "tool's result"), "a tool result refused: %s", okv_last_error());
            okv_tokenizer_free(tn);
        }
    }
    /* No template and no chat tokens: unsupported. With the tokens: guessed. */
    struct tiny plain = { .extras = { "ab" } };
    okv_tokenizer *t = load_tiny(&plain);
    char *out = NULL;
    if (t) {
        CHECK(okv_tokenizer_chat_format(t) == OKV_CHAT_FORMAT_NONE, "none");
        CHECK(okv_tokenizer_apply_chat(t, c0, 1, true, &out) == OKV_ERR_UNSUPPORTED && out == NULL, "unsupported");
        okv_tokenizer_free(t);
    }
    struct tiny guess = { .added = { "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>" },
                          .added_special = { true, true, true } };
    t = load_tiny(&guess);
    if (t) {
        CHECK(okv_tokenizer_chat_format(t) == OKV_CHAT_FORMAT_LLAMA3, "llama3 from the vocabulary");
        okv_tokenizer_free(t);
    }
}

/* ---- corrupt inputs ---- */

static void expect_json_error(const char *json, enum okv_status want, const char *needle, const char *what)
{
    char path[256];
    path_in_tmp(path, sizeof(path), "bad.json");
    write_text(path, json);
    okv_tokenizer *t = NULL;
    enum okv_status st = okv_tokenizer_from_json_file(path, &t);
    CHECK(st == want && t == NULL, "%s: status %d (%s), want %d", what, st, okv_last_error(), want);
    CHECK(strstr(okv_last_error(), needle) && strstr(okv_last_error(), "bad.json"),
          "%s: message \"%s\" should name the file and \"%s\"", what, okv_last_error(), needle);
    okv_tokenizer_free(t);
}

#define VOCAB_AB "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}"
#define PRE_BL "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"

static void test_json_errors(void)
{
    okv_tokenizer *t = NULL;
    CHECK(okv_tokenizer_from_json_file("/nonexistent/tokenizer.json", &t) == OKV_ERR_IO && !t, "missing file");
    CHECK(strstr(okv_last_error(), "/nonexistent/tokenizer.json") != NULL, "names the path");
    CHECK(okv_tokenizer_from_hf_dir("/nonexistent", &t) == OKV_ERR_IO && !t, "missing dir");
    expect_json_error("{\"model\": ", OKV_ERR_FORMAT, "invalid JSON", "truncated JSON");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\",\"merges\":[]}}", OKV_ERR_FORMAT, "model.vocab",
                      "no vocab");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\"," VOCAB_AB "}}", OKV_ERR_FORMAT, "model.merges",
                      "no merges");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\"," VOCAB_AB ",\"merges\":[\"a b\",\"a c\"]}}",
                      OKV_ERR_FORMAT, "model.merges[1]", "merge of an unknown token");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\"," VOCAB_AB ",\"merges\":[\"b a\"]}}",
                      OKV_ERR_FORMAT, "merged token", "merge result not in vocab");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\"," VOCAB_AB ",\"merges\":[\"ab\"]}}",
                      OKV_ERR_FORMAT, "model.merges[0]", "merge without a space");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}",
                      OKV_ERR_FORMAT, "model.vocab", "negative id");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999},\"merges\":[]}}",
                      OKV_ERR_FORMAT, "model.vocab", "huge id");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}",
                      OKV_ERR_FORMAT, "id 0", "duplicate id");
    expect_json_error("{" PRE_BL ",\"added_tokens\":[{\"id\":5}],\"model\":{\"type\":\"BPE\"," VOCAB_AB ",\"merges\":[]}}",
                      OKV_ERR_FORMAT, "added_tokens[0]", "added token without content");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"Unigram\"," VOCAB_AB ",\"merges\":[]}}",
                      OKV_ERR_UNSUPPORTED, "Unigram", "unigram");
    /* SentencePiece-style forms this tokenizer does not read (the ones it reads: test_tokenizer_ref) */
    expect_json_error("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\"},\"model\":{\"type\":\"BPE\","
                      VOCAB_AB ",\"merges\":[]}}",
                      OKV_ERR_UNSUPPORTED, "Metaspace replacement", "metaspace with another replacement");
    expect_json_error("{" PRE_BL ",\"model\":{\"type\":\"BPE\",\"byte_fallback\":true," VOCAB_AB ",\"merges\":[]}}",
                      OKV_ERR_UNSUPPORTED, "byte_fallback", "byte fallback with a byte-level pre-tokenizer");
    expect_json_error("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Replace\","
                      "\"pattern\":{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"}]},\"model\":{\"type\":\"BPE\"," VOCAB_AB
                      ",\"merges\":[]}}",
                      OKV_ERR_UNSUPPORTED, "normalizer", "a SentencePiece normalizer with NFKC");
    expect_json_error("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                      "{\"Regex\":\"\\\\w+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
                      "\"use_regex\":false}]},\"model\":{\"type\":\"BPE\"," VOCAB_AB ",\"merges\":[]}}",
                      OKV_ERR_UNSUPPORTED, "Split pattern", "unknown split regex");

    /* tokenizer_config.json naming a token the vocabulary lacks. */
    char dir[256], path[300];
    path_in_tmp(dir, sizeof(dir), "cfgdir");
    snprintf(path, sizeof(path), "mkdir -p '%s'", dir);
    if (system(path) != 0)
        exit(1);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    write_text(path, "{" PRE_BL ",\"model\":{\"type\":\"BPE\"," VOCAB_AB ",\"merges\":[\"a b\"]}}");
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    write_text(path, "{\"bos_token\": {\"content\": \"<s>\"}}");
    CHECK(okv_tokenizer_from_hf_dir(dir, &t) == OKV_ERR_FORMAT && !t, "bos not in vocab");
    CHECK(strstr(okv_last_error(), "tokenizer_config.json") && strstr(okv_last_error(), "bos_token"),
          "message: %s", okv_last_error());
}

/* ---- a minimal GGUF writer for corrupt-metadata cases ---- */

struct gw { FILE *f; int n_kv; };
static void w32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void w64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }
static void wstr(FILE *f, const char *s) { w64(f, strlen(s)); fwrite(s, 1, strlen(s), f); }
static void kv_str(FILE *f, const char *k, const char *v) { wstr(f, k); w32(f, OKV_GGUF_TYPE_STRING); wstr(f, v); }
static void kv_u32(FILE *f, const char *k, uint32_t v) { wstr(f, k); w32(f, OKV_GGUF_TYPE_U32); w32(f, v); }
static void kv_strs(FILE *f, const char *k, const char *const *v, int n)
{
    wstr(f, k); w32(f, OKV_GGUF_TYPE_ARRAY); w32(f, OKV_GGUF_TYPE_STRING); w64(f, (uint64_t)n);
    for (int i = 0; i < n; i++) wstr(f, v[i]);
}
static void kv_i32s(FILE *f, const char *k, const int32_t *v, int n)
{
    wstr(f, k); w32(f, OKV_GGUF_TYPE_ARRAY); w32(f, OKV_GGUF_TYPE_I32); w64(f, (uint64_t)n);
    fwrite(v, 4, (size_t)n, f);
}

/* Flags choose what to break. */
enum { G_NO_MODEL = 1, G_NO_TOKENS = 2, G_BAD_MERGE = 4, G_BAD_BOS = 8, G_SHORT_TYPES = 16, G_LLAMA_MODEL = 32 };

static enum okv_status load_gguf_case(int flags, const char *pre, okv_tokenizer **t)
{
    static const char *const tokens[] = { "a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "<|eot_id|>", "<|end_of_text|>" };
    static const int32_t types[] = { 1, 1, 1, 1, 1, 3, 3 };
    const char *merges[] = { "a b", flags & G_BAD_MERGE ? "a zz" : "\xc4\xa0 ab" };
    char path[256];
    path_in_tmp(path, sizeof(path), "case.gguf");
    FILE *f = fopen(path, "wb");
    int n_kv = 0;
    n_kv += !(flags & G_NO_MODEL) + !(flags & G_NO_TOKENS) + 5;
    w32(f, 0x46554747u); w32(f, 3); w64(f, 0); w64(f, (uint64_t)n_kv);
    if (!(flags & G_NO_MODEL))
        kv_str(f, "tokenizer.ggml.model", flags & G_LLAMA_MODEL ? "llama" : "gpt2");
    if (!(flags & G_NO_TOKENS))
        kv_strs(f, "tokenizer.ggml.tokens", tokens, 7);
    kv_i32s(f, "tokenizer.ggml.token_type", types, flags & G_SHORT_TYPES ? 6 : 7);
    kv_strs(f, "tokenizer.ggml.merges", merges, 2);
    kv_u32(f, "tokenizer.ggml.bos_token_id", flags & G_BAD_BOS ? 7 : 6);
    kv_u32(f, "tokenizer.ggml.eos_token_id", 5);
    kv_str(f, "tokenizer.ggml.pre", pre);
    long pos = ftell(f);
    for (long i = pos; i % 32; i++)
        fputc(0, f);
    fclose(f);
    okv_gguf *g = NULL;
    *t = NULL;
    enum okv_status st = okv_gguf_open(path, &g);
    CHECK(st == OKV_OK, "gguf open: %s", okv_last_error());
    if (st == OKV_OK)
        st = okv_tokenizer_from_gguf(g, t);
    okv_gguf_close(g);
    return st;
}

static void test_gguf_errors(void)
{
    okv_tokenizer *t;
    enum okv_status st = load_gguf_case(0, "llama-bpe", &t);
    CHECK(st == OKV_OK, "valid mini GGUF: %s", okv_last_error());
    if (t) {
        CHECK(okv_tokenizer_pretok(t) == OKV_PRETOK_LLAMA3 && okv_tokenizer_add_bos(t), "llama-bpe: pretok, add_bos");
        CHECK(okv_tokenizer_bos(t) == 6 && okv_tokenizer_eos(t) == 5 && okv_tokenizer_is_eog(t, 5) &&
              okv_tokenizer_is_eog(t, 6), "ids and eog");
        CHECK(okv_tokenizer_chat_format(t) == OKV_CHAT_FORMAT_NONE, "no template, no chat tokens");
        expect_ids(t, "ab ab", 5, false, (int32_t[]){ 2, 4, -1 }, "mini gguf encode");
        int32_t *ids;
        size_t n;
        CHECK(okv_tokenizer_encode(t, "ab", 2, true, false, &ids, &n) == OKV_OK && n == 2 && ids[0] == 6, "add_bos");
        okv_free(ids);
        okv_tokenizer_free(t);
    }
    static const struct { const char *pre; enum okv_pretok want; } pres[] = {
        { "smollm", OKV_PRETOK_SMOLLM }, { "qwen2", OKV_PRETOK_QWEN2 }, { "llama3", OKV_PRETOK_LLAMA3 },
        { "gpt2", OKV_PRETOK_GPT2 }, { "something-else", OKV_PRETOK_GPT2 },
    };
    okv_log_set(NULL, NULL, OKV_LOG_LEVEL_ERROR);   /* the unknown .pre warns */
    for (size_t i = 0; i < sizeof(pres) / sizeof(pres[0]); i++) {
        CHECK(load_gguf_case(0, pres[i].pre, &t) == OKV_OK && okv_tokenizer_pretok(t) == pres[i].want,
              "pre %s", pres[i].pre);
        okv_tokenizer_free(t);
    }
    okv_log_set(NULL, NULL, OKV_LOG_LEVEL_WARN);
    static const struct { int flags; enum okv_status want; const char *needle; } cases[] = {
        { G_NO_MODEL, OKV_ERR_FORMAT, "tokenizer.ggml.model" },
        { G_LLAMA_MODEL, OKV_ERR_FORMAT, "tokenizer.ggml.scores" },   /* SentencePiece without its scores */
        { G_NO_TOKENS, OKV_ERR_FORMAT, "tokenizer.ggml.tokens" },
        { G_BAD_MERGE, OKV_ERR_FORMAT, "tokenizer.ggml.merges[1]" },
        { G_BAD_BOS, OKV_ERR_FORMAT, "bos_token_id" },
        { G_SHORT_TYPES, OKV_ERR_FORMAT, "tokenizer.ggml.token_type" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        st = load_gguf_case(cases[i].flags, "gpt2", &t);
        CHECK(st == cases[i].want && t == NULL, "gguf case %zu: status %d (%s)", i, st, okv_last_error());
        CHECK(strstr(okv_last_error(), cases[i].needle) && strstr(okv_last_error(), "case.gguf"),
              "gguf case %zu: message \"%s\" should name case.gguf and %s", i, okv_last_error(), cases[i].needle);
        okv_tokenizer_free(t);
    }
}

/* ---- the real SmolLM2 tokenizer ---- */

/* decode(encode(s)) == s, except for bytes the vocabulary has no token for (SmolLM2
 * lacks 21 of the 256, e.g. 0xC0, 0xFF), which encode drops. */
static int roundtrip(const okv_tokenizer *t, const char *s, size_t len, const char *what)
{
    int32_t *ids;
    size_t n, dl, nw = 0;
    char *back, *want = malloc(len + 1);
    int dropped = 0;
    for (size_t i = 0; i < len; i++) {
        if (t->byte_to_id[(uint8_t)s[i]] >= 0)
            want[nw++] = s[i];
        else
            dropped++;
    }
    enum okv_status st = okv_tokenizer_encode(t, s, len, false, true, &ids, &n);
    CHECK(st == OKV_OK, "%s: encode: %s", what, okv_last_error());
    if (st == OKV_OK) {
        CHECK(okv_tokenizer_decode(t, ids, n, false, &back, &dl) == OKV_OK && dl == nw && memcmp(back, want, nw) == 0,
              "%s: decode(encode(s)) != s", what);
        okv_free(back);
        okv_free(ids);
    }
    free(want);
    return dropped;
}

struct thread_arg {
    const okv_tokenizer *t;
    const char *text;
    size_t len;
    const int32_t *want;
    size_t n_want;
    int bad;
};

static void *encode_thread(void *p)
{
    struct thread_arg *a = p;
    for (int r = 0; r < 20; r++) {
        int32_t *ids;
        size_t n;
        if (okv_tokenizer_encode(a->t, a->text, a->len, false, true, &ids, &n) != OKV_OK ||
            n != a->n_want || memcmp(ids, a->want, n * sizeof(int32_t)) != 0)
            a->bad++;
        okv_free(ids);
    }
    return NULL;
}

static void test_real(const okv_tokenizer *t, const char *what)
{
    printf("-- %s\n", what);
    CHECK(okv_tokenizer_n_vocab(t) == 49152, "n_vocab");
    CHECK(okv_tokenizer_bos(t) == 1 && okv_tokenizer_eos(t) == 2, "bos/eos %d/%d", okv_tokenizer_bos(t), okv_tokenizer_eos(t));
    CHECK(!okv_tokenizer_add_bos(t), "SmolLM2 adds no BOS");
    CHECK(okv_tokenizer_pretok(t) == OKV_PRETOK_SMOLLM, "smollm pre-tokenizer");
    CHECK(okv_tokenizer_chat_format(t) == OKV_CHAT_FORMAT_CHATML, "chatml");
    CHECK(okv_tokenizer_is_eog(t, 2) && okv_tokenizer_is_eog(t, 0) && !okv_tokenizer_is_eog(t, 1) &&
          !okv_tokenizer_is_eog(t, 100), "eog: <|im_end|> and <|endoftext|>");
    CHECK(strcmp(okv_tokenizer_token_str(t, 1), "<|im_start|>") == 0, "token 1");

    /* transformers' apply_chat_template with the model's template (tests/py/make_smollm2_tokenizer.py). */
    const struct okv_chat_msg m[] = { { .role = "user", .content = "Hi" } };
    char *out = NULL;
    CHECK(okv_tokenizer_apply_chat(t, m, 1, true, &out) == OKV_OK &&
          strcmp(out, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                      "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") == 0,
          "SmolLM2 chat: %s", out ? out : "(null)");
    okv_free(out);

    /* Invalid UTF-8 and odd bytes survive encode/decode. */
#define BYTES(x) { x, sizeof(x) - 1 }
    static const struct { const char *s; size_t n; } odd[] = {
        BYTES("\xff\xfe"), BYTES("abc\x80" "def"), BYTES("\xc3("), BYTES("\xe2\x82"), BYTES("\xf0\x9f\x99"),
        BYTES("\xed\xa0\x80 surrogate"), BYTES("\xc0\xaf overlong"), BYTES("a\0b\0"),
        BYTES(" \xff 123 \xfe\xfe  x"), BYTES("\xf4\x90\x80\x80"), BYTES("<|im_start|>\xff<|im_end|>"),
        BYTES("\xe4\xbd\xa0\xe5\xa5"), BYTES("12\xff" "34\xc2\xbd"),
    };
#undef BYTES
    int dropped = 0;
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        char w[32];
        snprintf(w, sizeof(w), "odd bytes %zu", i);
        dropped += roundtrip(t, odd[i].s, odd[i].n, w);
    }
    /* 0xFF x4, 0xFE x3, 0xC0 x1 */
    CHECK(dropped == 8, "odd strings hold 8 bytes SmolLM2 has no token for, not %d", dropped);
    unsigned seed = 12345;
    char *rnd = malloc(4096);
    for (int k = 0; k < 20; k++) {
        for (int i = 0; i < 4096; i++) {
            seed = seed * 1103515245u + 12345u;
            rnd[i] = (char)(seed >> 16);
        }
        roundtrip(t, rnd, (size_t)(k + 1) * 200, "random bytes");
    }
    free(rnd);

    /* Streaming decode of real tokens reproduces the text; some emoji split. */
    const char *text = "Hi 🙂 héllo 你好 👨‍👩‍👧‍👦 done\n";
    int32_t *ids;
    size_t n;
    if (okv_tokenizer_encode(t, text, strlen(text), false, true, &ids, &n) == OKV_OK) {
        struct okv_detok d = { 0 };
        char acc[256] = "", piece[64];
        int held = 0;
        for (size_t i = 0; i < n; i++) {
            int k = okv_detok_push(t, &d, ids[i], false, piece, sizeof(piece));
            CHECK(k >= 0, "push");
            held += k == 0;
            strcat(acc, piece);
        }
        CHECK(okv_detok_flush(&d, piece, sizeof(piece)) == 0, "nothing left");
        CHECK(strcmp(acc, text) == 0 && held > 0, "stream = text (held back %d times): %s", held, acc);
        okv_free(ids);
    }

    /* Speed: 10k-byte inputs, one of them a single 10k-byte piece. */
    static char big[3][10001];
    for (int i = 0; i < 10000; i++) {
        seed = seed * 1103515245u + 12345u;
        big[0][i] = "abcdefgh ijklmn opqrst uvwxyz,.0123\n"[(seed >> 16) % 36];
        big[1][i] = 'a';
        big[2][i] = "ab"[(seed >> 20) & 1];
    }
    for (int k = 0; k < 3; k++) {
        double t0 = okv_now();
        CHECK(okv_tokenizer_encode(t, big[k], 10000, false, true, &ids, &n) == OKV_OK, "big");
        double ms = (okv_now() - t0) * 1e3;
        printf("   10k-byte input %d: %zu ids in %.2f ms\n", k, n, ms);
        CHECK(ms < 100.0, "10k bytes took %.1f ms", ms);
        okv_free(ids);
    }

    /* Concurrent encode gives the single-threaded ids. */
    size_t blen = 3000;
    if (okv_tokenizer_encode(t, big[0], blen, false, true, &ids, &n) == OKV_OK) {
        pthread_t th[4];
        struct thread_arg a[4];
        for (int i = 0; i < 4; i++) {
            a[i] = (struct thread_arg){ t, big[0], blen, ids, n, 0 };
            pthread_create(&th[i], NULL, encode_thread, &a[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK(a[i].bad == 0, "thread %d: %d bad encodes", i, a[i].bad);
        }
        okv_free(ids);
    }
}

int main(void)
{
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/okv_tok_test_XXXXXX");
    if (!mkdtemp(g_tmp)) { perror("mkdtemp"); return 1; }
    const char *src = getenv("OKV_SOURCE_DIR");
    snprintf(g_src, sizeof(g_src), "%s", src ? src : ".");

    test_byte_mapping();
    test_merges();
    test_added_tokens();
    test_detok();
    test_chat();
    test_json_errors();
    test_gguf_errors();

    char path[1200];
    okv_tokenizer *t = NULL;
    snprintf(path, sizeof(path), "%s/tests/data/smollm2", g_src);
    if (okv_tokenizer_from_hf_dir(path, &t) == OKV_OK) {
        test_real(t, "SmolLM2 from tests/data/smollm2 (tokenizer.json + tokenizer_config.json)");
        okv_tokenizer_free(t);
    } else {
        CHECK(0, "load %s: %s", path, okv_last_error());
    }
    snprintf(path, sizeof(path), "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", g_src);
    okv_gguf *g = NULL;
    if (access(path, R_OK) != 0) {
        printf("-- %s missing: GGUF checks skipped\n", path);
    } else if (okv_gguf_open(path, &g) == OKV_OK && okv_tokenizer_from_gguf(g, &t) == OKV_OK) {
        test_real(t, "SmolLM2 from the GGUF");
        okv_tokenizer_free(t);
    } else {
        CHECK(0, "load %s: %s", path, okv_last_error());
    }
    okv_gguf_close(g);

    CHECK(okv_alloc_live_count(OKV_TAG_TOKENIZER) == 0, "%lld tokenizer allocations leaked",
          (long long)okv_alloc_live_count(OKV_TAG_TOKENIZER));
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0)
        printf("could not remove %s\n", g_tmp);
    printf("%d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
