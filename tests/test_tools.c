/* label: unit */
/* Tools (function calling) in the server (src/server/tools.c): tool definitions and call arguments written as
 * Python's json.dumps writes them (the reference: tests/data/chat_tools.json, made by Python's json module,
 * tests/py/make_chat_tools_expect.py); the reply's <tool_call> blocks read into calls, whole and as a
 * stream fed in pieces of every size (the same calls and content either way); the request's tools and
 * tool_choice read, with the errors of the malformed ones. */
#include "server/reasoning.h"
#include "server/tools.h"
#include "oasiskv/structured.h"
#include "oasiskv/tokenizer.h"
#include "testutil.h"

#include <cjson/cJSON.h>

static void test_pyjson(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/chat_tools.json", tu_src_dir());
    char *fx = tu_read_file(path, NULL);
    cJSON *root = fx ? cJSON_Parse(fx) : NULL;
    free(fx);
    CHECK(root != NULL, "read %s", path);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "pyjson")) {
        const char *in = cJSON_GetObjectItem(c, "in")->valuestring, *want = cJSON_GetObjectItem(c, "out")->valuestring;
        cJSON *v = cJSON_Parse(in);
        struct srv_buf b = {0};
        srv_pyjson(v, &b);
        srv_buf_put(&b, "", 1);
        CHECK(v && !b.oom && strcmp(b.s, want) == 0, "json.dumps of %s:\n got  %s\n want %s", in, b.s ? b.s : "", want);
        okv_free(b.s);
        cJSON_Delete(v);
        n++;
    }
    CHECK(n >= 9, "pyjson cases: %d", n);
    /* from the text (srv_pyjson_rd): every case, 1.0 and integers past 2^53 too; fed in pieces of every size,
     * the same text (what a prefix gives is a prefix of the whole's) */
    n = 0;
    for (int set = 0; set < 2; set++)
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, set ? "pyjson_text" : "pyjson")) {
        const char *in = cJSON_GetObjectItem(c, "in")->valuestring, *want = cJSON_GetObjectItem(c, "out")->valuestring;
        char *got = srv_pyjson_of_text(in, strlen(in));
        CHECK(got && strcmp(got, want) == 0, "json.dumps of the text %s:\n got  %s\n want %s", in, got ? got : "(null)", want);
        okv_free(got);
        for (size_t step = 1; step <= strlen(in); step++) {
            struct srv_pyjson_rd r = {0};
            struct srv_buf b = {0};
            size_t prev = 0;
            bool prefix = true;
            for (size_t at = 0; at < strlen(in); at += step) {
                const size_t k = strlen(in) - at < step ? strlen(in) - at : step;
                srv_pyjson_feed(&r, in + at, k, at + k == strlen(in), &b);
                prefix = prefix && b.len >= prev && (b.len == 0 || !strncmp(b.s, want, b.len));
                prev = b.len;
            }
            srv_buf_put(&b, "", 1);
            CHECK(r.done && !r.bad && prefix && !strcmp(b.s, want), "%s in pieces of %zu: %s", in, step, b.s);
            okv_free(b.s);
        }
        n++;
    }
    CHECK(n >= 12, "pyjson text cases: %d", n);
    static const char *const not_json[] = {"{\"a\" 1}", "[1,]", "{\"a\": tru}", "01", "1.", "\"\\ud800\"", "\"a\tb\"",
                                           "[1] 2", "{\"a\": 1", "\"\\x\"", "-", "1e"};
    for (size_t k = 0; k < sizeof not_json / sizeof not_json[0]; k++) {
        char *got = srv_pyjson_of_text(not_json[k], strlen(not_json[k]));
        CHECK(!got, "not JSON as json.loads reads it: %s -> %s", not_json[k], got);
        okv_free(got);
    }
    n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "pyjson4")) {   /* json.dumps(indent=4): Llama 3.1's tools */
        const char *in = cJSON_GetObjectItem(c, "in")->valuestring, *want = cJSON_GetObjectItem(c, "out")->valuestring;
        cJSON *v = cJSON_Parse(in);
        struct srv_buf b = {0};
        srv_pyjson_indent(v, &b, 4);
        srv_buf_put(&b, "", 1);
        CHECK(v && !b.oom && strcmp(b.s, want) == 0, "json.dumps(indent=4) of %s:\n got  %s\n want %s", in, b.s ? b.s : "",
              want);
        okv_free(b.s);
        cJSON_Delete(v);
        n++;
    }
    CHECK(n >= 9, "pyjson4 cases: %d", n);
    n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "pyjson4_text")) {   /* the same from the text (1.0 kept) */
        const char *in = cJSON_GetObjectItem(c, "in")->valuestring, *want = cJSON_GetObjectItem(c, "out")->valuestring;
        char *canon = srv_pyjson_of_text(in, strlen(in));
        char *got = canon ? srv_pyjson_indent_text(canon, 4) : NULL;
        CHECK(got && strcmp(got, want) == 0, "json.dumps(indent=4) of the text %s:\n got  %s\n want %s", in,
              got ? got : "(null)", want);
        okv_free(canon);
        okv_free(got);
        n++;
    }
    CHECK(n >= 3, "pyjson4_text cases: %d", n);
    /* a case's tools as the server writes them, against json.dumps (the fixture's tool strings, 20.0 among them):
     * from the parsed tree where it keeps the form, and always from a request's text, found in it by their spans
     * (srv_tools_parse's way), the text written compact here; Llama 3.1's with indent 4 */
    int n_float = 0;
    for (int llama = 0; llama < 2; llama++)
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(llama ? cJSON_GetObjectItem(root, "llama31") : root, "cases")) {
            struct srv_buf body = {0};
            srv_buf_put(&body, "{\"model\":\"m\",\"tools\":[", strlen("{\"model\":\"m\",\"tools\":["));
            const cJSON *t;
            int k = 0;
            cJSON_ArrayForEach(t, cJSON_GetObjectItem(c, "tools")) {
                if (k++)
                    srv_buf_put(&body, ",", 1);
                bool in_str = false;   /* the tool's text without the whitespace between tokens */
                for (const char *p = t->valuestring; *p; p++) {
                    if (in_str && *p == '\\') {
                        srv_buf_put(&body, p++, 2);
                        continue;
                    }
                    in_str ^= *p == '"';
                    if (in_str || (*p != ' ' && *p != '\n'))
                        srv_buf_put(&body, p, 1);
                }
                if (!llama) {
                    cJSON *v = cJSON_Parse(t->valuestring);
                    struct srv_buf b = {0};
                    srv_pyjson(v, &b);
                    srv_buf_put(&b, "", 1);
                    const bool has_float = strstr(t->valuestring, ".0,") || strstr(t->valuestring, ".0}");
                    n_float += has_float;
                    CHECK(has_float || (b.s && strcmp(b.s, t->valuestring) == 0), "a tool from the tree:\n got  %s\n want %s",
                          b.s ? b.s : "", t->valuestring);
                    okv_free(b.s);
                    cJSON_Delete(v);
                }
            }
            srv_buf_put(&body, "],\"stream\":false}", 17);
            const char *ts, *vs[16];
            size_t tn, vn[16];
            const int cnt = srv_json_member(body.s, body.len, "tools", &ts, &tn) ? srv_json_items(ts, tn, vs, vn, 16) : -2;
            CHECK(cnt == k, "the tools' spans in %s: %d of %d", body.s, cnt, k);
            k = 0;
            cJSON_ArrayForEach(t, cJSON_GetObjectItem(c, "tools")) {
                if (k >= cnt)
                    break;
                char *canon = srv_pyjson_of_text(vs[k], vn[k]);
                char *got = canon && llama ? srv_pyjson_indent_text(canon, 4) : canon;
                CHECK(got && strcmp(got, t->valuestring) == 0, "a tool from the request's text:\n got  %s\n want %s",
                      got ? got : "(null)", t->valuestring);
                if (got != canon)
                    okv_free(got);
                okv_free(canon);
                k++;
            }
            okv_free(body.s);
        }
    CHECK(n_float >= 1, "a tool with float literals (20.0) among the cases: %d", n_float);
    cJSON_Delete(root);
}

struct reply_case {
    enum okv_chat_tools fmt;
    const char *text;
    const char *content;   /* NULL: none */
    int n;
    const char *names[3];
    const char *args[3];
    /* where the stream differs (a call that began streaming stays one): its calls, else 0 and the whole read's */
    int sn;
    const char *snames[1], *sargs[1];
};

static const struct reply_case REPLIES[] = {
    {OKV_CHAT_TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", NULL, 1,
     {"get_weather"}, {"{\"city\": \"Paris\"}"}, 0, {0}, {0}},
    {OKV_CHAT_TOOLS_HERMES, "Sure.\n<tool_call>\n{\"name\":\"a\",\"arguments\":{\"x\":[1,2.5,\"\\u00e9\"]}}\n</tool_call>\n<tool_call>\n"
     "{\"name\": \"b\", \"arguments\": {}}\n</tool_call>", "Sure.\n", 2, {"a", "b"},
     {"{\"x\": [1, 2.5, \"\xc3\xa9\"]}", "{}"}, 0, {0}, {0}},
    /* cut off before the closing tag: the call is read to the end */
    {OKV_CHAT_TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": \"v\"}}\n", NULL, 1, {"f"}, {"{\"k\": \"v\"}"}, 0, {0}, {0}},
    /* no call */
    {OKV_CHAT_TOOLS_HERMES, "Just text, with a < and <tool and </tool_call>.", "Just text, with a < and <tool and </tool_call>.", 0, {0}, {0}, 0, {0}, {0}},
    /* a call that is not {"name", "arguments"}: all of it is content */
    {OKV_CHAT_TOOLS_HERMES, "x<tool_call>{\"name\": 3}</tool_call>", "x<tool_call>{\"name\": 3}</tool_call>", 0, {0}, {0}, 0, {0}, {0}},
    {OKV_CHAT_TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing</tool_call>",
     "<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing</tool_call>", 0, {0}, {0}, 1, {"f"}, {"{}"}},
    /* cut off inside the arguments: no call to the whole read; the stream had begun it */
    {OKV_CHAT_TOOLS_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Par",
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Par", 0, {0}, {0}, 1, {"f"}, {"{\"city\": \"Par"}},
    /* arguments as json.dumps writes what json.loads reads: float literals stay floats, integers keep their digits */
    {OKV_CHAT_TOOLS_HERMES, "<tool_call>{\"name\":\"f\",\"arguments\":{\"t\":20.0,\"n\":12345678901234567890123,"
     "\"e\":1E2,\"z\":-0,\"s\":\"a\\u00e9\\ud83d\\ude00\\/\\b\\u0001\"}}</tool_call>", NULL, 1, {"f"},
     {"{\"t\": 20.0, \"n\": 12345678901234567890123, \"e\": 100.0, \"z\": 0, \"s\": \"a\xc3\xa9\xf0\x9f\x98\x80/\\b\\u0001\"}"}, 0, {0}, {0}},
    /* the arguments before the name: read whole at the close */
    {OKV_CHAT_TOOLS_HERMES, "<tool_call>{\"arguments\": {\"a\": [1, {}]}, \"name\": \"f\"}</tool_call>", NULL, 1, {"f"},
     {"{\"a\": [1, {}]}"}, 0, {0}, {0}},
    /* text between and after calls is dropped (the content is what comes before the first) */
    {OKV_CHAT_TOOLS_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call> and <tool_call>{\"name\": \"g\", "
     "\"arguments\": {\"b\": null}}</tool_call> bye", NULL, 2, {"f", "g"}, {"{\"a\": 1}", "{\"b\": null}"}, 0, {0}, {0}},
    /* Llama 3.1: a reply that is call objects (';' between), else content */
    {OKV_CHAT_TOOLS_LLAMA31, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", NULL, 1, {"get_weather"},
     {"{\"city\": \"Oslo\"}"}, 0, {0}, {0}},
    {OKV_CHAT_TOOLS_LLAMA31, " \n{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"k\": [1]}}", NULL, 2,
     {"a", "b"}, {"{}", "{\"k\": [1]}"}, 0, {0}, {0}},
    {OKV_CHAT_TOOLS_LLAMA31, "The weather {is} fine.", "The weather {is} fine.", 0, {0}, {0}, 0, {0}, {0}},
    {OKV_CHAT_TOOLS_LLAMA31, "{\"name\": \"a\", \"parameters\": {\"x\": ", "{\"name\": \"a\", \"parameters\": {\"x\": ", 0, {0}, {0}, 0, {0}, {0}},
    {OKV_CHAT_TOOLS_LLAMA31, "{\"answer\": 42}", "{\"answer\": 42}", 0, {0}, {0}, 0, {0}, {0}},
};

/* the stream's reading of text fed in pieces of `step` bytes */
/* the stream's reading of text fed in pieces of `step` bytes: its calls (the pieces of each joined; a call's first
 * piece names it, and pieces come in order of the calls), and how many pieces there were */
static void stream_read(enum okv_chat_tools fmt, const char *text, size_t step, struct srv_buf *content,
                        struct srv_tool_call **calls, int *n, int *pieces)
{
    struct srv_tool_stream s = {.fmt = fmt};
    const size_t len = strlen(text);
    *calls = NULL;
    *n = 0;
    *pieces = 0;
    for (size_t at = 0;; at += step) {
        const bool end = at >= len;   /* the final feed, of nothing */
        const size_t k = end ? 0 : len - at < step ? len - at : step;
        struct srv_tool_delta *d = NULL;
        int nd = 0;
        CHECK(srv_tool_stream_feed(&s, end ? "" : text + at, k, end, content, &d, &nd), "feed");
        for (int i = 0; i < nd; i++) {
            if (d[i].name) {   /* a new call: the next index */
                CHECK(d[i].index == *n, "a call's first piece: index %d, want %d", d[i].index, *n);
                *calls = realloc(*calls, sizeof **calls * (size_t)(*n + 1));
                (*calls)[*n] = (struct srv_tool_call){.name = d[i].name, .arguments = d[i].arguments};
                d[i].name = d[i].arguments = NULL;
                (*n)++;
            } else {
                CHECK(*n > 0 && d[i].index == *n - 1 && (i == 0 || d[i - 1].index != d[i].index),
                      "a later piece of the last call, one a feed: index %d of %d", d[i].index, *n);
                if (*n > 0) {
                    char **a = &(*calls)[*n - 1].arguments;
                    const size_t have = strlen(*a);
                    *a = okv_realloc(*a, have + strlen(d[i].arguments) + 1, OKV_TAG_SERVER);
                    strcpy(*a + have, d[i].arguments);
                }
            }
            (*pieces)++;
        }
        srv_tool_deltas_free(d, nd);
        if (end)
            break;
    }
    srv_buf_put(content, "", 1);
    srv_tool_stream_free(&s);
}

static void test_replies(void)
{
    for (size_t i = 0; i < sizeof REPLIES / sizeof REPLIES[0]; i++) {
        const struct reply_case *rc = &REPLIES[i];
        struct srv_tool_reply r;
        CHECK(srv_tools_read_reply(rc->fmt, rc->text, strlen(rc->text), &r), "read");
        CHECK((rc->content == NULL) == (r.content == NULL) && (!rc->content || !strcmp(rc->content, r.content)),
              "reply %zu content: [%s] want [%s]", i, r.content ? r.content : "(null)", rc->content ? rc->content : "(null)");
        CHECK(r.n == rc->n, "reply %zu: %d calls, want %d", i, r.n, rc->n);
        for (int k = 0; k < r.n && k < rc->n; k++)
            CHECK(!strcmp(r.calls[k].name, rc->names[k]) && !strcmp(r.calls[k].arguments, rc->args[k]),
                  "reply %zu call %d: %s %s", i, k, r.calls[k].name, r.calls[k].arguments);
        /* the stream: the same calls in every piece size; its content is what the whole read gives, except
         * that a call which does not parse sends the text before it first (it cannot be taken back) */
        for (size_t step = 1; step <= strlen(rc->text) + 1; step++) {
            struct srv_buf content = {0};
            struct srv_tool_call *calls;
            int n, pieces;
            stream_read(rc->fmt, rc->text, step, &content, &calls, &n, &pieces);
            const int want_n = rc->sn ? rc->sn : rc->n;
            const char *want = rc->sn ? "" : rc->content ? rc->content : "";
            CHECK(n == want_n && !strcmp(content.s, want), "reply %zu in pieces of %zu: %d calls, content [%s] want [%s]",
                  i, step, n, content.s, want);
            /* Hermes calls stream: a byte at a time, the arguments come in several pieces */
            if (step == 1 && rc->fmt == OKV_CHAT_TOOLS_HERMES && n > 0 && strlen(calls[0].arguments) > 4 &&
                strstr(rc->text, "{\"name\""))
                CHECK(pieces > n + 2, "reply %zu a byte at a time: %d pieces for %d calls", i, pieces, n);
            for (int k = 0; k < n && k < want_n; k++) {
                const char *wn = rc->sn ? rc->snames[k] : rc->names[k], *wa = rc->sn ? rc->sargs[k] : rc->args[k];
                CHECK(!strcmp(calls[k].name, wn) && !strcmp(calls[k].arguments, wa),
                      "stream %zu/%zu call %d: %s %s, want %s %s", i, step, k, calls[k].name, calls[k].arguments, wn, wa);
                okv_free(calls[k].name);
                okv_free(calls[k].arguments);
            }
            free(calls);
            okv_free(content.s);
        }
        srv_tool_reply_free(&r);
    }
    char id1[48], id2[48];
    srv_tool_call_id(id1);
    srv_tool_call_id(id2);
    CHECK(!strncmp(id1, "chatcmpl-tool-", 14) && strlen(id1) == 14 + 32 && strcmp(id1, id2) != 0, "ids %s %s", id1, id2);
}

/* a ChatML tokenizer with or without Qwen2.5's tools template */
static okv_tokenizer *chatml_tok(bool tools)
{
    char dir[256], path[320];
    snprintf(dir, sizeof dir, "/tmp/okv_test_tools_%d_%d", (int)getpid(), tools);
    snprintf(path, sizeof path, "mkdir -p %s", dir);
    if (system(path) != 0)
        return NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, "
          "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": []}, \"added_tokens\": ["
          "{\"id\": 2, \"content\": \"<|im_start|>\", \"special\": true}, {\"id\": 3, \"content\": \"<|im_end|>\", "
          "\"special\": true}]}", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    f = fopen(path, "w");
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "chat_template",
                            tools ? "{%- if tools %}# Tools <tools></tools> <tool_call></tool_call>{%- endif %}"
                                    "<tool_response><|im_start|>"
                                  : "{{ '<|im_start|>' + message['role'] }}");
    char *t = cJSON_Print(cfg);
    fputs(t, f);
    fclose(f);
    cJSON_free(t);
    cJSON_Delete(cfg);
    okv_tokenizer *tok = NULL;
    CHECK(okv_tokenizer_from_hf_dir(dir, &tok) == OKV_OK, "tokenizer: %s", okv_last_error());
    snprintf(path, sizeof path, "rm -rf %s", dir);
    if (system(path) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tok;
}

static bool parse_req(const okv_tokenizer *tok, const char *body, struct srv_tools *t, char *err, const char **param)
{
    cJSON *root = cJSON_Parse(body);
    CHECK(root != NULL, "body %s", body);
    const bool ok = root && srv_tools_parse(tok, root, NULL, 0, t, err, 512, param);
    cJSON_Delete(root);
    return ok;
}

static void test_request(void)
{
    okv_tokenizer *th = chatml_tok(true), *tn = chatml_tok(false);
    if (!th || !tn) {
        okv_tokenizer_free(th);
        okv_tokenizer_free(tn);
        return;
    }
    CHECK(okv_tokenizer_chat_tools(th) == OKV_CHAT_TOOLS_HERMES && okv_tokenizer_chat_tools(tn) == OKV_CHAT_TOOLS_NONE,
          "templates");
    const char *F = "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
                    "\"properties\": {\"x\": {\"type\": \"integer\"}}, \"required\": [\"x\"]}}}";
    const char *G = "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}";
    char body[2048], err[512];
    const char *param;
    struct srv_tools t;
    /* auto (the default with tools): listed, in json.dumps form */
    snprintf(body, sizeof body, "{\"tools\": [%s, %s]}", F, G);
    CHECK(parse_req(th, body, &t, err, &param) && t.choice == SRV_TOOLS_AUTO && t.n == 2 &&
          !strcmp(t.defs[1], "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}"), "auto: %s", err);
    srv_tools_free(&t);
    /* no tools, or none: off */
    CHECK(parse_req(tn, "{\"messages\": []}", &t, err, &param) && t.choice == SRV_TOOLS_OFF && t.n == 0, "no tools");
    snprintf(body, sizeof body, "{\"tools\": [%s], \"tool_choice\": \"none\"}", F);
    CHECK(parse_req(tn, body, &t, err, &param) && t.choice == SRV_TOOLS_OFF && t.n == 0, "none: %s", err);
    srv_tools_free(&t);
    /* named: forced, its parameters the schema; with a template without tools too (nothing listed) */
    snprintf(body, sizeof body, "{\"tools\": [%s, %s], \"tool_choice\": {\"type\": \"function\", \"function\": "
             "{\"name\": \"f\"}}}", F, G);
    CHECK(parse_req(tn, body, &t, err, &param) && t.choice == SRV_TOOLS_FORCED && !strcmp(t.name, "f") && t.n == 0 &&
          t.params && strstr(t.params, "\"required\":[\"x\"]"), "named: %s", err);
    srv_tools_free(&t);
    snprintf(body, sizeof body, "{\"tools\": [%s], \"tool_choice\": \"required\"}", G);
    CHECK(parse_req(th, body, &t, err, &param) && t.choice == SRV_TOOLS_FORCED && !strcmp(t.name, "g") && t.n == 1 &&
          t.params && !strcmp(t.params, "{\"type\": \"object\", \"properties\": {}}"),
          "required, one tool without parameters: %s", err);
    srv_tools_free(&t);
    /* required with several: an array of calls, a union of the functions by name (one call without parallel) */
    for (int par = 0; par < 2; par++) {
        snprintf(body, sizeof body, "{\"tools\": [%s, %s], \"tool_choice\": \"required\"%s}", F, G,
                 par ? ", \"parallel_tool_calls\": false" : "");
        CHECK(parse_req(th, body, &t, err, &param) && t.choice == SRV_TOOLS_REQUIRED && t.params &&
              strstr(t.params, "\"anyOf\"") && strstr(t.params, "\"const\":\"g\"") &&
              (strstr(t.params, "\"maxItems\":1") != NULL) == (par == 1), "required, two tools: %s", t.params);
        okv_json_schema *cs = NULL;
        CHECK(t.params && okv_json_schema_compile(t.params, strlen(t.params), &cs) == OKV_OK, "its schema compiles: %s",
              okv_last_error());
        if (cs) {   /* the calls it admits, and not */
            static const struct { const char *doc; bool ok; } docs[] = {
                {"[{\"name\": \"f\", \"parameters\": {\"x\": 3}}]", true},
                {"[{\"name\": \"g\", \"parameters\": {}}, {\"name\": \"f\", \"parameters\": {\"x\": -1}}]", true},
                {"[{\"name\": \"g\", \"parameters\": {\"x\": 3}}]", false},
                {"[{\"name\": \"f\", \"parameters\": {}}]", false},
                {"[{\"name\": \"h\", \"parameters\": {}}]", false},
                {"[]", false},
            };
            for (size_t k = 0; k < sizeof docs / sizeof docs[0]; k++) {
                struct okv_json_state st;
                okv_json_init_schema(&st, cs);
                const bool done = okv_json_feed_n(&st, (const uint8_t *)docs[k].doc, strlen(docs[k].doc)) &&
                                  okv_json_complete(&st);
                const bool want = docs[k].ok && !(par == 1 && strstr(docs[k].doc, "}, {"));
                CHECK(done == want, "parallel %d: %s %s", par, docs[k].doc, done ? "admitted" : "refused");
            }
            okv_json_schema_free(cs);
        }
        srv_tools_free(&t);
    }
    struct srv_tool_reply rr;
    const char *req2 = "[{\"name\": \"f\", \"parameters\": {\"x\":3}}, {\"name\": \"g\", \"parameters\": {}}]";
    CHECK(srv_tools_read_required(req2, strlen(req2), &rr) && rr.n == 2 && !strcmp(rr.calls[0].arguments, "{\"x\": 3}") &&
          !strcmp(rr.calls[1].name, "g") && !rr.content, "a required reply read: %d calls", rr.n);
    srv_tool_reply_free(&rr);
    CHECK(!srv_tools_read_required("[{\"name\": \"f\", \"param", 20, &rr) && rr.n == 0, "a cut-off required reply");
    /* the refused, each with its message */
    static const struct { const char *body; const char *param, *msg; bool hermes; } bad[] = {
        {"{\"tools\": {}}", "tools", "must be an array", true},
        {"{\"tools\": [{\"type\": \"code\"}]}", "tools", "tools[0] must be", true},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"bad name\"}}]}", "tools", "name must be", true},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 3}}]}", "tools",
         "parameters must be", true},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", "
         "\"function\": {\"name\": \"f\"}}]}", "tools", "defined twice", true},
        {"{\"tool_choice\": \"auto\"}", "tool_choice", "needs 'tools'", true},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": \"sometimes\"}",
         "tool_choice", "must be", true},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": {\"type\": "
         "\"function\", \"function\": {\"name\": \"h\"}}}", "tool_choice", "not among", true},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"$defs\": {}}}}, "
         "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}], \"tool_choice\": \"required\"}", "tool_choice", "$defs",
         true},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}", "tools", "does not offer tools", false},
        {"{\"parallel_tool_calls\": 1}", "parallel_tool_calls", "boolean", true},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        param = NULL;
        err[0] = 0;
        CHECK(!parse_req(bad[i].hermes ? th : tn, bad[i].body, &t, err, &param) && param &&
                  !strcmp(param, bad[i].param) && strstr(err, bad[i].msg),
              "bad %zu (%s): param %s, '%s'", i, bad[i].body, param ? param : "(null)", err);
    }
    okv_tokenizer_free(th);
    okv_tokenizer_free(tn);
}

/* serve --reasoning-parser: the <think> part apart, whole and fed in pieces of every size */
static void test_reasoning(void)
{
    static const struct { enum okv_reasoning kind; const char *text, *think, *answer; } cases[] = {
        {OKV_REASONING_DEEPSEEK_R1, "plan a\nplan b</think>\n\nThe answer.", "plan a\nplan b", "\n\nThe answer."},
        {OKV_REASONING_DEEPSEEK_R1, " <think>\nx</think>y", "\nx", "y"},
        {OKV_REASONING_DEEPSEEK_R1, "cut off while thinking <", "cut off while thinking <", NULL},
        {OKV_REASONING_DEEPSEEK_R1, "<think></think>", NULL, NULL},
        {OKV_REASONING_DEEPSEEK_R1, "", NULL, NULL},
        {OKV_REASONING_QWEN3, "<think>\nhmm</think>\n\nHi <there>.", "\nhmm", "\n\nHi <there>."},
        {OKV_REASONING_QWEN3, "No thinking </think> here", NULL, "No thinking </think> here"},
        {OKV_REASONING_QWEN3, "<thin", NULL, "<thin"},
        {OKV_REASONING_QWEN3, "\n<think>a</thi", "a</thi", NULL},
        {OKV_REASONING_QWEN3, "<think>r</think><tool_call>{}</tool_call>", "r", "<tool_call>{}</tool_call>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *think = NULL, *answer = NULL;
        const char *t = cases[i].text;
        CHECK(srv_reasoning_split(cases[i].kind, t, strlen(t), &think, &answer), "split %zu", i);
        CHECK((think == NULL) == (cases[i].think == NULL) && (!think || !strcmp(think, cases[i].think)) &&
                  (answer == NULL) == (cases[i].answer == NULL) && (!answer || !strcmp(answer, cases[i].answer)),
              "split %zu [%s]: think [%s] answer [%s]", i, t, think ? think : "(null)", answer ? answer : "(null)");
        okv_free(think);
        okv_free(answer);
        for (size_t step = 1; step <= strlen(t) + 1; step++) {
            struct srv_reasoning_stream rs = {0};
            struct srv_buf r = {0}, c = {0};
            for (size_t at = 0; at < strlen(t); at += step) {
                const size_t k = strlen(t) - at < step ? strlen(t) - at : step;
                CHECK(srv_reasoning_feed(cases[i].kind, &rs, t + at, k, false, &r, &c), "feed");
            }
            CHECK(srv_reasoning_feed(cases[i].kind, &rs, "", 0, true, &r, &c), "final feed");
            srv_buf_put(&r, "", 1);
            srv_buf_put(&c, "", 1);
            const char *wt = cases[i].think ? cases[i].think : "", *wa = cases[i].answer ? cases[i].answer : "";
            CHECK(!strcmp(r.s, wt) && !strcmp(c.s, wa), "stream %zu in pieces of %zu: think [%s] answer [%s]", i, step,
                  r.s, c.s);
            okv_free(r.s);
            okv_free(c.s);
            srv_reasoning_stream_free(&rs);
        }
    }
}

int main(void)
{
    test_reasoning();
    test_pyjson();
    test_replies();
    test_request();
    return tu_finish("test_tools");
}
