/* OpenAI's Responses API on the chat completions path (responses.h). The request's `input` items become chat
 * messages (instructions a system message first; function_call items the assistant's tool_calls,
 * function_call_output items tool messages, a reasoning item the next assistant message's reasoning_content);
 * max_output_tokens, text.format, tools and tool_choice their chat forms; other fields (vLLM's sampling extras:
 * top_k, min_p, seed, stop, structured_outputs, chat_template_kwargs, ...) pass through as the chat path reads
 * them. The reply's parts become output items in the order the model wrote them: reasoning, the message, the
 * function calls. */
#define _GNU_SOURCE
#include "server/responses.h"
#include "server/tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { RS_NONE, RS_REASONING, RS_MESSAGE, RS_CALL };

static void new_id(char out[48], const char *prefix)
{
    char p[16];
    snprintf(p, sizeof p, "%s_", prefix);
    srv_random_id(out, p);
}

#define FAIL(name, ...) srv_errf(err, errsz, param, name, __VA_ARGS__)

static const cJSON *get(const cJSON *o, const char *name)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    return x && !cJSON_IsNull(x) ? x : NULL;
}

static const char *str_of(const cJSON *o, const char *name)
{
    const cJSON *x = get(o, name);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* The text of a content value: a string, or an array of parts of the given text types joined by newlines (as the
 * chat path joins its text parts). NULL with err set: a part that is not text. */
static char *content_text(const cJSON *c, const char *const *types, int n_types, const char *where, char *err,
                          size_t errsz, const char **param)
{
    if (cJSON_IsString(c))
        return okv_strdup(c->valuestring, OKV_TAG_SERVER);
    if (!cJSON_IsArray(c)) {
        FAIL("input", "%s must be a string or an array of content parts", where);
        return NULL;
    }
    struct srv_buf b = {0};
    srv_buf_put(&b, "", 0);
    int k = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const char *type = cJSON_IsObject(part) ? str_of(part, "type") : NULL;
        const char *text = cJSON_IsObject(part) ? str_of(part, "text") : NULL;
        bool ok = false;
        for (int i = 0; i < n_types && type; i++)
            ok |= !strcmp(type, types[i]);
        if (!ok || !text) {
            okv_free(b.s);
            if (type && (!strcmp(type, "input_image") || !strcmp(type, "input_file") || !strcmp(type, "input_audio")))
                FAIL("input", "%s[%d]: '%s' parts are not supported: this server's models take text", where, k, type);
            else
                FAIL("input", "%s[%d] must be a text part ({\"type\": \"%s\", \"text\": ...})", where, k, types[0]);
            return NULL;
        }
        if (k++)
            srv_buf_put(&b, "\n", 1);
        srv_buf_put(&b, text, strlen(text));
    }
    if (b.oom || !b.s) {
        okv_free(b.s);
        FAIL(NULL, "out of memory");
        return NULL;
    }
    return b.s;
}

/* the last chat message when it is the assistant's, else a new assistant message added */
static cJSON *assistant_msg(cJSON *msgs)
{
    const int n = cJSON_GetArraySize(msgs);
    cJSON *last = n ? cJSON_GetArrayItem(msgs, n - 1) : NULL;
    const char *role = last ? str_of(last, "role") : NULL;
    if (role && !strcmp(role, "assistant"))
        return last;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddItemToArray(msgs, m);
    return m;
}

static bool add_reasoning(cJSON *msg, char **pending)
{
    if (!*pending)
        return true;
    bool ok = cJSON_AddStringToObject(msg, "reasoning_content", *pending) != NULL;
    okv_free(*pending);
    *pending = NULL;
    return ok;
}

/* input (a string, or an array of items) -> msgs */
static bool read_input(const cJSON *input, cJSON *msgs, char *err, size_t errsz, const char **param)
{
    static const char *const in_types[] = {"input_text", "output_text", "text"};
    static const char *const out_types[] = {"output_text", "input_text", "text"};
    static const char *const rs_types[] = {"reasoning_text"};
    static const char *const sum_types[] = {"summary_text"};
    if (cJSON_IsString(input)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", input->valuestring);
        cJSON_AddItemToArray(msgs, m);
        return true;
    }
    if (!cJSON_IsArray(input))
        return FAIL("input", "'input' must be a string or an array of input items");
    char *reasoning = NULL;   /* a reasoning item's text, for the assistant message after it */
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, input) {
        char where[64];
        snprintf(where, sizeof where, "input[%d]", i);
        if (!cJSON_IsObject(it)) {
            okv_free(reasoning);
            return FAIL("input", "%s must be an object", where);
        }
        const char *type = str_of(it, "type");
        const char *role = str_of(it, "role");
        if (role && (!type || !strcmp(type, "message"))) {
            const bool asst = !strcmp(role, "assistant");
            if (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") && !asst) {
                okv_free(reasoning);
                return FAIL("input", "%s: role '%.40s' is not supported (user, system, developer, assistant)", where, role);
            }
            const cJSON *c = get(it, "content");
            snprintf(where, sizeof where, "input[%d].content", i);
            char *text = c ? content_text(c, asst ? out_types : in_types, 3, where, err, errsz, param)
                           : okv_strdup("", OKV_TAG_SERVER);
            if (!text) {
                okv_free(reasoning);
                return c ? false : FAIL(NULL, "out of memory");
            }
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", role);
            cJSON_AddStringToObject(m, "content", text);
            okv_free(text);
            cJSON_AddItemToArray(msgs, m);
            if (asst && !add_reasoning(m, &reasoning))
                return FAIL(NULL, "out of memory");
        } else if (type && !strcmp(type, "function_call")) {
            const char *call_id = str_of(it, "call_id"), *name = str_of(it, "name"), *args = str_of(it, "arguments");
            if (!call_id || !name || !args) {
                okv_free(reasoning);
                return FAIL("input", "%s: a function_call item needs string 'call_id', 'name' and 'arguments'", where);
            }
            cJSON *m = assistant_msg(msgs);
            cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
            if (!calls)
                calls = cJSON_AddArrayToObject(m, "tool_calls");
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "id", call_id);
            cJSON_AddStringToObject(c, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(c, "function");
            cJSON_AddStringToObject(fn, "name", name);
            cJSON_AddStringToObject(fn, "arguments", args);
            cJSON_AddItemToArray(calls, c);
            if (!add_reasoning(m, &reasoning))
                return FAIL(NULL, "out of memory");
        } else if (type && !strcmp(type, "function_call_output")) {
            const char *call_id = str_of(it, "call_id");
            const cJSON *out = get(it, "output");
            if (!call_id || !out) {
                okv_free(reasoning);
                return FAIL("input", "%s: a function_call_output item needs a string 'call_id' and an 'output'", where);
            }
            snprintf(where, sizeof where, "input[%d].output", i);
            char *text = content_text(out, in_types, 3, where, err, errsz, param);
            if (!text) {
                okv_free(reasoning);
                return false;
            }
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "tool");
            cJSON_AddStringToObject(m, "tool_call_id", call_id);
            cJSON_AddStringToObject(m, "content", text);
            okv_free(text);
            cJSON_AddItemToArray(msgs, m);
        } else if (type && !strcmp(type, "reasoning")) {
            /* its text (content), else its summary: given back to the template as the answer's thinking */
            const cJSON *c = get(it, "content");
            const cJSON *s = get(it, "summary");
            snprintf(where, sizeof where, "input[%d].%s", i, c ? "content" : "summary");
            char *text = c ? content_text(c, rs_types, 1, where, err, errsz, param)
                       : s ? content_text(s, sum_types, 1, where, err, errsz, param)
                           : okv_strdup("", OKV_TAG_SERVER);
            if (!text) {
                okv_free(reasoning);
                return c || s ? false : FAIL(NULL, "out of memory");
            }
            okv_free(reasoning);
            reasoning = text;
        } else {
            okv_free(reasoning);
            if (type)
                return FAIL("input", "%s: items of type '%.40s' are not supported (message, function_call, "
                            "function_call_output, reasoning)", where, type);
            return FAIL("input", "%s needs a 'role' (a message) or a 'type'", where);
        }
        i++;
    }
    okv_free(reasoning);   /* a reasoning item with no answer after it: nothing to attach it to */
    if (cJSON_GetArraySize(msgs) == 0)
        return FAIL("input", "'input' is empty");
    return true;
}

/* Responses fields that have another name here, or no meaning: refused with what to send instead */
static const struct { const char *name, *why; } refused[] = {
    {"messages", "the conversation goes in 'input' (a string or an array of items)"},
    {"max_tokens", "use 'max_output_tokens'"},
    {"max_completion_tokens", "use 'max_output_tokens'"},
    {"response_format", "use 'text': {\"format\": ...}"},
    {"logprobs", "use 'top_logprobs' (or include 'message.output_text.logprobs')"},
    {"n", "a response has one output; send several requests"},
    {"functions", "use 'tools' ([{\"type\": \"function\", \"name\": ...}])"},
    {"function_call", "use 'tool_choice'"},
    {"conversation", "this server keeps no conversations: go on from a response with 'previous_response_id', or "
                     "send the whole conversation in 'input'"},
    {"prompt", "stored prompt templates are not supported: send the text in 'instructions' and 'input'"},
    {"max_tool_calls", "not supported: the model's reply is read for calls as a whole"},
};

/* Responses fields read here (the rest pass through to the chat path) */
static const char *const handled[] = {
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "tools", "tool_choice",
    "parallel_tool_calls", "text", "reasoning", "metadata", "top_logprobs", "include", "store", "background", "user",
    "truncation", "service_tier", "safety_identifier", "prompt_cache_key", "stream_options", "previous_response_id",
};

static bool is_handled(const char *k)
{
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
        if (!strcmp(k, handled[i]))
            return true;
    return false;
}

static bool read_tools(const cJSON *root, const char *body, size_t len, cJSON *chat, char *err, size_t errsz,
                       const char **param)
{
    const cJSON *tools = get(root, "tools");
    if (tools) {
        if (!cJSON_IsArray(tools))
            return FAIL("tools", "'tools' must be an array");
        /* the tools' text, where the tree lost a float literal's form */
        const char *ts, *vs[SRV_MAX_TOOLS];
        size_t tn, vn[SRV_MAX_TOOLS];
        const int n_text = srv_json_member(body, len, "tools", &ts, &tn) ? srv_json_items(ts, tn, vs, vn, SRV_MAX_TOOLS) : -1;
        const bool by_text = n_text == cJSON_GetArraySize(tools);
        cJSON *out = cJSON_AddArrayToObject(chat, "tools");
        int i = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            const char *type = cJSON_IsObject(t) ? str_of(t, "type") : NULL;
            if (!type || strcmp(type, "function"))
                return FAIL("tools", "tools[%d]: only function tools ({\"type\": \"function\", \"name\": ...}) are "
                            "supported%s%s%s", i, type ? " (got '" : "", type ? type : "", type ? "')" : "");
            if (!str_of(t, "name"))
                return FAIL("tools", "tools[%d] needs a string 'name'", i);
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(c, "function");
            static const char *const keys[] = {"name", "description", "parameters", "strict"};
            for (int k = 0; k < 4; k++) {
                const cJSON *v = get(t, keys[k]);
                const char *ps;
                size_t pn;
                char *txt = NULL;
                if (v && k == 2 && by_text && srv_json_member(vs[i], vn[i], "parameters", &ps, &pn) &&
                    (txt = srv_pyjson_of_text(ps, pn))) {
                    cJSON_AddItemToObject(fn, keys[k], cJSON_CreateRaw(txt));
                    okv_free(txt);
                } else if (v) {
                    cJSON_AddItemToObject(fn, keys[k], cJSON_Duplicate(v, true));
                }
            }
            cJSON_AddItemToArray(out, c);
            i++;
        }
    }
    const cJSON *tc = get(root, "tool_choice");
    if (tc) {
        if (cJSON_IsString(tc)) {
            cJSON_AddStringToObject(chat, "tool_choice", tc->valuestring);
        } else {
            const char *type = cJSON_IsObject(tc) ? str_of(tc, "type") : NULL;
            const char *name = cJSON_IsObject(tc) ? str_of(tc, "name") : NULL;
            if (!type || strcmp(type, "function") || !name)
                return FAIL("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": "
                            "\"function\", \"name\": ...}");
            cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice");
            cJSON_AddStringToObject(c, "type", "function");
            cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", name);
        }
    }
    const cJSON *ptc = get(root, "parallel_tool_calls");
    if (ptc)
        cJSON_AddItemToObject(chat, "parallel_tool_calls", cJSON_Duplicate(ptc, true));
    return true;
}

/* text.format -> response_format */
static bool read_text_format(const cJSON *root, cJSON *chat, char *err, size_t errsz, const char **param)
{
    const cJSON *text = get(root, "text");
    if (!text)
        return true;
    if (!cJSON_IsObject(text))
        return FAIL("text", "'text' must be an object ({\"format\": ...})");
    const cJSON *f = get(text, "format");
    if (!f)
        return true;
    const char *type = cJSON_IsObject(f) ? str_of(f, "type") : NULL;
    if (!type)
        return FAIL("text.format", "'text.format' must be an object with a 'type'");
    if (!strcmp(type, "text"))
        return true;
    cJSON *rf = cJSON_AddObjectToObject(chat, "response_format");
    if (!strcmp(type, "json_object")) {
        cJSON_AddStringToObject(rf, "type", "json_object");
        return true;
    }
    if (strcmp(type, "json_schema"))
        return FAIL("text.format", "'text.format.type' must be text, json_object or json_schema (got '%.40s')", type);
    const cJSON *schema = get(f, "schema");
    if (!cJSON_IsObject(schema))
        return FAIL("text.format", "a json_schema format needs a 'schema' object");
    cJSON_AddStringToObject(rf, "type", "json_schema");
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    static const char *const keys[] = {"name", "description", "schema", "strict"};
    for (int k = 0; k < 4; k++) {
        const cJSON *v = get(f, keys[k]);
        if (v)
            cJSON_AddItemToObject(js, keys[k], cJSON_Duplicate(v, true));
    }
    return true;
}

/* a message's content as one text part: [{"type": type, "text": text}] */
static cJSON *one_part(const char *type, const char *text)
{
    cJSON *part = cJSON_CreateObject();
    cJSON_AddStringToObject(part, "type", type);
    cJSON_AddStringToObject(part, "text", text);
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemToArray(arr, part);
    return arr;
}

/* The input (read_input accepted it) as the items a stored response lists: a string as a user message; a message
 * with "type": "message", its string content as one text part (input_text, output_text for the assistant's); each
 * item with an id (msg_, fc_, fco_, rs_) unless it has one. Appended to items; false: out of memory. */
static bool add_input_items(cJSON *items, const cJSON *input)
{
    if (cJSON_IsString(input)) {
        cJSON *it = cJSON_CreateObject();
        char id[48];
        new_id(id, "msg");
        cJSON_AddStringToObject(it, "id", id);
        cJSON_AddStringToObject(it, "type", "message");
        cJSON_AddStringToObject(it, "role", "user");
        cJSON_AddItemToObject(it, "content", one_part("input_text", input->valuestring));
        return cJSON_AddItemToArray(items, it);
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, input) {
        cJSON *it = cJSON_Duplicate(x, true);
        if (!it)
            return false;
        const char *type = str_of(it, "type"), *role = str_of(it, "role");
        if (!type) {
            cJSON_AddStringToObject(it, "type", "message");
            type = "message";
        }
        const cJSON *c = get(it, "content");
        if (!strcmp(type, "message") && cJSON_IsString(c))
            cJSON_ReplaceItemInObjectCaseSensitive(
                it, "content", one_part(role && !strcmp(role, "assistant") ? "output_text" : "input_text", c->valuestring));
        if (!cJSON_IsString(get(it, "id"))) {
            char id[48];
            new_id(id, !strcmp(type, "function_call")          ? "fc"
                       : !strcmp(type, "function_call_output") ? "fco"
                       : !strcmp(type, "reasoning")            ? "rs"
                                                               : "msg");
            cJSON_DeleteItemFromObjectCaseSensitive(it, "id");
            cJSON_AddStringToObject(it, "id", id);
        }
        if (!cJSON_AddItemToArray(items, it))
            return false;
    }
    return true;
}

static void echo_or(cJSON *echo, const cJSON *root, const char *name, cJSON *dflt)
{
    const cJSON *v = get(root, name);
    if (v) {
        cJSON_Delete(dflt);
        cJSON_AddItemToObject(echo, name, cJSON_Duplicate(v, true));
    } else {
        cJSON_AddItemToObject(echo, name, dflt);
    }
}

bool srv_resp_request(const cJSON *root, const char *body, size_t len, srv_resp_store *store, cJSON **chat_out,
                      struct srv_resp_req *rq, char *err, size_t errsz, const char **param, unsigned *status)
{
    *chat_out = NULL;
    memset(rq, 0, sizeof *rq);
    *param = NULL;
    *status = 400;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (get(root, refused[i].name))
            return FAIL(refused[i].name, "'%s' is not a parameter of this server's Responses API: %s", refused[i].name,
                        refused[i].why);
    const cJSON *bg = get(root, "background");
    if (bg && !cJSON_IsBool(bg))
        return FAIL("background", "'background' must be a boolean");
    const char *trunc = str_of(root, "truncation");
    if (get(root, "truncation") && (!trunc || strcmp(trunc, "disabled")))
        return FAIL("truncation", "only 'truncation': \"disabled\" is supported (an input too long is an error)");
    const cJSON *input = get(root, "input");
    if (!input)
        return FAIL("input", "'input' is required (a string, or an array of input items)");
    const cJSON *inst = get(root, "instructions");
    if (inst && !cJSON_IsString(inst))
        return FAIL("instructions", "'instructions' must be a string");
    bool logprobs = false;
    const cJSON *inc = get(root, "include");
    if (inc) {
        if (!cJSON_IsArray(inc))
            return FAIL("include", "'include' must be an array of strings");
        const cJSON *x;
        cJSON_ArrayForEach(x, inc) {
            if (!cJSON_IsString(x))
                return FAIL("include", "'include' must be an array of strings");
            if (!strcmp(x->valuestring, "message.output_text.logprobs"))
                logprobs = true;
            else if (strcmp(x->valuestring, "reasoning.encrypted_content"))   /* reasoning items carry their text */
                return FAIL("include", "'include': '%.60s' is not supported (message.output_text.logprobs)",
                            x->valuestring);
        }
    }
    const cJSON *tl = get(root, "top_logprobs");
    if (tl && (!cJSON_IsNumber(tl) || tl->valuedouble < 0 || tl->valuedouble != (double)(int)tl->valuedouble))
        return FAIL("top_logprobs", "'top_logprobs' must be a non-negative integer");
    const cJSON *mot = get(root, "max_output_tokens");
    if (mot && !cJSON_IsNumber(mot))
        return FAIL("max_output_tokens", "'max_output_tokens' must be an integer");
    const cJSON *sto = get(root, "store");
    if (sto && !cJSON_IsBool(sto))
        return FAIL("store", "'store' must be a boolean");
    const bool keep = store && !cJSON_IsFalse(sto);
    const cJSON *so = get(root, "stream_options");   /* the Responses API's: include_obfuscation alone */
    if (so) {
        if (!cJSON_IsObject(so))
            return FAIL("stream_options", "'stream_options' must be an object");
        const cJSON *x;
        cJSON_ArrayForEach(x, so) {
            if (strcmp(x->string, "include_obfuscation"))
                return FAIL("stream_options", "'stream_options': '%.40s' is not an option of the Responses API "
                            "(include_obfuscation; a streamed response ends with response.completed, which carries the "
                            "usage)", x->string);
            if (!cJSON_IsBool(x) && !cJSON_IsNull(x))
                return FAIL("stream_options", "'stream_options.include_obfuscation' must be a boolean");
        }
    }
    const bool background = cJSON_IsTrue(bg);
    if (background && !keep)
        return FAIL("background", store ? "a background response must be stored: 'store' cannot be false with it"
                                        : "background responses need the store (this server keeps none: serve "
                                          "--max-stored-responses 0)");
    if (background && cJSON_IsTrue(get(root, "stream")))
        return FAIL("background", "a background response is not streamed here: poll GET /v1/responses/{id}");
    const cJSON *prev_id = get(root, "previous_response_id");
    cJSON *prev = NULL;   /* the conversation that previous_response_id ended */
    if (prev_id) {
        if (!cJSON_IsString(prev_id))
            return FAIL("previous_response_id", "'previous_response_id' must be a string");
        if (!store)
            return FAIL("previous_response_id", "this server stores no responses (serve --max-stored-responses 0): "
                        "send the whole conversation in 'input'");
        bool oom;
        if (!srv_resp_store_get(store, prev_id->valuestring, NULL, &prev, NULL, &oom)) {
            if (oom) {
                *status = 500;
                return FAIL(NULL, "out of memory");
            }
            *status = 404;
            return FAIL("previous_response_id", "Previous response with id '%.80s' not found (never made, made with "
                        "\"store\": false, deleted, or evicted: the server keeps its last serve "
                        "--max-stored-responses).", prev_id->valuestring);
        }
    }

    cJSON *chat = cJSON_CreateObject();
    cJSON *msgs = cJSON_AddArrayToObject(chat, "messages");
    if (inst) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", inst->valuestring);
        cJSON_AddItemToArray(msgs, m);
    }
    if ((prev && !read_input(prev, msgs, err, errsz, param)) || !read_input(input, msgs, err, errsz, param) ||
        !read_tools(root, body, len, chat, err, errsz, param) || !read_text_format(root, chat, err, errsz, param)) {
        cJSON_Delete(prev);
        cJSON_Delete(chat);
        return false;
    }
    if (keep) {   /* the conversation through this input, kept with the response */
        rq->items = prev ? prev : cJSON_CreateArray();
        prev = NULL;
        if (!rq->items || !add_input_items(rq->items, input)) {
            cJSON_Delete(rq->items);
            rq->items = NULL;
            cJSON_Delete(chat);
            *status = 500;
            return FAIL(NULL, "out of memory");
        }
        rq->store = store;
    }
    cJSON_Delete(prev);
    const cJSON *v;
    if ((v = get(root, "model")))
        cJSON_AddItemToObject(chat, "model", cJSON_Duplicate(v, true));
    if (mot)
        cJSON_AddItemToObject(chat, "max_tokens", cJSON_Duplicate(mot, true));
    if ((v = get(root, "temperature")))
        cJSON_AddItemToObject(chat, "temperature", cJSON_Duplicate(v, true));
    if ((v = get(root, "top_p")))
        cJSON_AddItemToObject(chat, "top_p", cJSON_Duplicate(v, true));
    if (logprobs || (tl && tl->valuedouble > 0)) {
        cJSON_AddBoolToObject(chat, "logprobs", true);
        cJSON_AddNumberToObject(chat, "top_logprobs", tl ? tl->valuedouble : 0);
    }
    const cJSON *stream = get(root, "stream");
    if (stream) {
        cJSON_AddItemToObject(chat, "stream", cJSON_Duplicate(stream, true));
        if (cJSON_IsTrue(stream))   /* the usage, for response.completed */
            cJSON_AddBoolToObject(cJSON_AddObjectToObject(chat, "stream_options"), "include_usage", true);
    }
    cJSON_ArrayForEach(v, root) {   /* vLLM's extras, as the chat path reads them */
        if (v->string && !is_handled(v->string))
            cJSON_AddItemToObject(chat, v->string, cJSON_Duplicate(v, true));
    }

    /* what the Response object writes back */
    cJSON *e = cJSON_CreateObject();
    echo_or(e, root, "instructions", cJSON_CreateNull());
    echo_or(e, root, "max_output_tokens", cJSON_CreateNull());
    echo_or(e, root, "temperature", cJSON_CreateNumber(1.0));
    echo_or(e, root, "top_p", cJSON_CreateNumber(1.0));
    const char *ts;
    size_t tn;
    char *tools_text = get(root, "tools") && srv_json_member(body, len, "tools", &ts, &tn) ? srv_pyjson_of_text(ts, tn) : NULL;
    if (tools_text)   /* as given (20.0 stays 20.0) */
        cJSON_AddItemToObject(e, "tools", cJSON_CreateRaw(tools_text));
    else
        echo_or(e, root, "tools", cJSON_CreateArray());
    okv_free(tools_text);
    echo_or(e, root, "tool_choice", cJSON_CreateString("auto"));
    echo_or(e, root, "parallel_tool_calls", cJSON_CreateTrue());
    cJSON *dtext = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(dtext, "format"), "type", "text");
    echo_or(e, root, "text", dtext);
    cJSON *dreason = cJSON_CreateObject();
    cJSON_AddNullToObject(dreason, "effort");
    cJSON_AddNullToObject(dreason, "summary");
    echo_or(e, root, "reasoning", dreason);
    echo_or(e, root, "metadata", cJSON_CreateObject());
    echo_or(e, root, "top_logprobs", cJSON_CreateNumber(0));
    echo_or(e, root, "user", cJSON_CreateNull());
    cJSON_AddStringToObject(e, "truncation", "disabled");
    cJSON_AddBoolToObject(e, "store", keep);
    cJSON_AddBoolToObject(e, "background", background);
    rq->background = background;
    if (prev_id && cJSON_IsString(prev_id))
        cJSON_AddStringToObject(e, "previous_response_id", prev_id->valuestring);
    else
        cJSON_AddNullToObject(e, "previous_response_id");
    cJSON_AddNullToObject(e, "max_tool_calls");
    rq->echo = e;
    new_id(rq->id, "resp");
    rq->created = (long)time(NULL);
    *chat_out = chat;
    return true;
}

void srv_resp_req_free(struct srv_resp_req *rq)
{
    cJSON_Delete(rq->echo);
    rq->echo = NULL;
    cJSON_Delete(rq->items);
    rq->items = NULL;
}

/* A finished response kept with its conversation (the request's items, then the output's), where rq has a store:
 * a failure to keep it (out of memory, larger than the store) is logged, the reply goes out all the same. */
void srv_resp_keep(const struct srv_resp_req *rq, const cJSON *response)
{
    if (!rq->store || !response)
        return;
    cJSON *items = cJSON_Duplicate(rq->items, true);
    const cJSON *x;
    bool ok = items != NULL;
    cJSON_ArrayForEach(x, get(response, "output")) {
        if (ok && !cJSON_AddItemToArray(items, cJSON_Duplicate(x, true)))
            ok = false;
    }
    if (!ok || !srv_resp_store_put(rq->store, rq->id, response, items, cJSON_GetArraySize(rq->items)))
        OKV_LOG_WARN("server: response %s was not stored (out of memory, or larger than the store)", rq->id);
    cJSON_Delete(items);
}

/* a Response object: status, output (consumed; NULL: empty), usage (consumed; NULL: null), model */
static cJSON *response_obj(const struct srv_resp_req *rq, const char *model, const char *status, cJSON *output,
                           cJSON *usage, const char *incomplete_reason, cJSON *error)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", rq->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)rq->created);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddStringToObject(o, "model", model ? model : "");
    cJSON_AddItemToObject(o, "output", output ? output : cJSON_CreateArray());
    if (error)
        cJSON_AddItemToObject(o, "error", error);
    else
        cJSON_AddNullToObject(o, "error");
    if (incomplete_reason)
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", incomplete_reason);
    else
        cJSON_AddNullToObject(o, "incomplete_details");
    const cJSON *x;
    cJSON_ArrayForEach(x, rq->echo)
        cJSON_AddItemToObject(o, x->string, cJSON_Duplicate(x, true));
    if (usage)
        cJSON_AddItemToObject(o, "usage", usage);
    else
        cJSON_AddNullToObject(o, "usage");
    return o;
}

cJSON *srv_resp_status_obj(const struct srv_resp_req *rq, const char *model, const char *status, const char *code,
                           const char *message)
{
    cJSON *err = NULL;
    if (code) {
        err = cJSON_CreateObject();
        cJSON_AddStringToObject(err, "code", code);
        cJSON_AddStringToObject(err, "message", message ? message : "");
    }
    return response_obj(rq, model, status, NULL, NULL, NULL, err);
}

static cJSON *usage_of(int prompt, int completion, int cached, int reasoning)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", prompt);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", cached);
    cJSON_AddNumberToObject(u, "output_tokens", completion);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", reasoning);
    cJSON_AddNumberToObject(u, "total_tokens", prompt + completion);
    return u;
}

static cJSON *reasoning_item(const char *id, const char *text, const char *status)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "reasoning");
    cJSON_AddArrayToObject(it, "summary");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "reasoning_text");
        cJSON_AddStringToObject(p, "text", text);
        cJSON_AddItemToArray(content, p);
    }
    cJSON_AddStringToObject(it, "status", status);
    return it;
}

static cJSON *text_part(const char *text, const cJSON *lps)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", text);
    cJSON_AddArrayToObject(p, "annotations");
    cJSON_AddItemToObject(p, "logprobs", lps ? cJSON_Duplicate(lps, true) : cJSON_CreateArray());
    return p;
}

static cJSON *message_item(const char *id, const char *text, const cJSON *lps, const char *status)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "status", status);
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text)
        cJSON_AddItemToArray(content, text_part(text, lps));
    return it;
}

static cJSON *call_item(const char *id, const char *call_id, const char *name, const char *args, const char *status)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "function_call");
    cJSON_AddStringToObject(it, "call_id", call_id);
    cJSON_AddStringToObject(it, "name", name);
    cJSON_AddStringToObject(it, "arguments", args);
    cJSON_AddStringToObject(it, "status", status);
    return it;
}

/* whether p[0..n) is all white space: such content before a reply's calls is not a message of its own */
static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\n' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

static const char *status_of(const char *finish, const char **incomplete)
{
    *incomplete = NULL;
    if (finish && !strcmp(finish, "length")) {
        *incomplete = "max_output_tokens";
        return "incomplete";
    }
    if (finish && !strcmp(finish, "abort"))
        return "cancelled";
    return "completed";
}

cJSON *srv_resp_reply(const struct srv_resp_req *rq, const cJSON *chat)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chat, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message");
    const char *finish = str_of(ch, "finish_reason");
    const char *incomplete;
    const char *status = status_of(finish, &incomplete);
    const char *item_status = incomplete ? "incomplete" : "completed";
    cJSON *output = cJSON_CreateArray();
    char id[48];
    const char *think = str_of(msg, "reasoning_content");
    if (think) {
        new_id(id, "rs");
        cJSON_AddItemToArray(output, reasoning_item(id, think, item_status));
    }
    const char *content = str_of(msg, "content");
    const cJSON *calls = get(msg, "tool_calls");
    if (content && (!blank(content, strlen(content)) || !cJSON_GetArraySize(calls))) {   /* (not the blank line before calls) */
        const cJSON *lps = cJSON_GetObjectItemCaseSensitive(get(ch, "logprobs"), "content");
        new_id(id, "msg");
        cJSON_AddItemToArray(output, message_item(id, content, lps, item_status));
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = get(c, "function");
        new_id(id, "fc");
        const char *cid = str_of(c, "id"), *name = str_of(fn, "name"), *args = str_of(fn, "arguments");
        cJSON_AddItemToArray(output, call_item(id, cid ? cid : "", name ? name : "", args ? args : "", "completed"));
    }
    const cJSON *u = get(chat, "usage");
    const cJSON *pt = get(u, "prompt_tokens"), *ct = get(u, "completion_tokens");
    const cJSON *cached = get(get(u, "prompt_tokens_details"), "cached_tokens");
    const cJSON *rt = get(get(u, "completion_tokens_details"), "reasoning_tokens");
    cJSON *r = response_obj(rq, str_of(chat, "model"), status, output,
                            usage_of(pt ? (int)pt->valuedouble : 0, ct ? (int)ct->valuedouble : 0,
                                     cached ? (int)cached->valuedouble : 0, rt ? (int)rt->valuedouble : 0),
                            incomplete, NULL);
    srv_resp_keep(rq, r);
    return r;
}

/* ---- streaming ---- */

bool srv_resp_stream_init(struct srv_resp_stream *st, struct srv_resp_req *rq)
{
    memset(st, 0, sizeof *st);
    st->rq = *rq;
    memset(rq, 0, sizeof *rq);
    st->output = cJSON_CreateArray();
    return st->output != NULL;
}

void srv_resp_stream_free(struct srv_resp_stream *st)
{
    srv_resp_req_free(&st->rq);
    cJSON_Delete(st->output);
    cJSON_Delete(st->lps);
    cJSON_Delete(st->pend_lps);
    okv_free(st->text.s);
    okv_free(st->pend.s);
    memset(st, 0, sizeof *st);
}

/* an event object, its type first (as OpenAI writes them) */
static cJSON *ev_new(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

/* one event: o (consumed, from ev_new) gets its sequence number and goes out */
static void emit(struct srv_resp_stream *st, struct srv_buf *out, cJSON *o)
{
    cJSON_AddNumberToObject(o, "sequence_number", st->seq++);
    const char *type = str_of(o, "type");
    char *s = type ? cJSON_PrintUnformatted(o) : NULL;
    if (!s) {
        cJSON_Delete(o);
        out->oom = true;
        return;
    }
    srv_buf_printf(out, "event: %s\ndata: ", type);
    cJSON_Delete(o);
    srv_buf_put(out, s, strlen(s));
    srv_buf_put(out, "\n\n", 2);
    cJSON_free(s);
}

static cJSON *ev_item(const char *type, int output_index, cJSON *item)
{
    cJSON *o = ev_new(type);
    cJSON_AddNumberToObject(o, "output_index", output_index);
    cJSON_AddItemToObject(o, "item", item);
    return o;
}

/* an event of the open item: item_id, output_index (and content_index where the type has one) */
static cJSON *ev_at(const struct srv_resp_stream *st, const char *type, bool content_index)
{
    cJSON *o = ev_new(type);
    cJSON_AddStringToObject(o, "item_id", st->item_id);
    cJSON_AddNumberToObject(o, "output_index", cJSON_GetArraySize(st->output));
    if (content_index)
        cJSON_AddNumberToObject(o, "content_index", 0);
    return o;
}

static const char *open_text(struct srv_resp_stream *st)
{
    return st->text.s ? st->text.s : "";
}

static void close_item(struct srv_resp_stream *st, struct srv_buf *out)
{
    const int at = cJSON_GetArraySize(st->output);
    const char *text = open_text(st);
    const char *status = st->finish[0] && !strcmp(st->finish, "length") ? "incomplete" : "completed";
    cJSON *item = NULL;
    if (st->kind == RS_REASONING) {
        cJSON *o = ev_at(st, "response.reasoning_text.done", true);
        cJSON_AddStringToObject(o, "text", text);
        emit(st, out, o);
        cJSON *part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "reasoning_text");
        cJSON_AddStringToObject(part, "text", text);
        o = ev_at(st, "response.content_part.done", true);
        cJSON_AddItemToObject(o, "part", part);
        emit(st, out, o);
        item = reasoning_item(st->item_id, text, status);
    } else if (st->kind == RS_MESSAGE) {
        cJSON *o = ev_at(st, "response.output_text.done", true);
        cJSON_AddStringToObject(o, "text", text);
        cJSON_AddItemToObject(o, "logprobs", st->lps ? cJSON_Duplicate(st->lps, true) : cJSON_CreateArray());
        emit(st, out, o);
        o = ev_at(st, "response.content_part.done", true);
        cJSON_AddItemToObject(o, "part", text_part(text, st->lps));
        emit(st, out, o);
        item = message_item(st->item_id, text, st->lps, status);
    } else if (st->kind == RS_CALL) {
        cJSON *o = ev_at(st, "response.function_call_arguments.done", false);
        cJSON_AddStringToObject(o, "name", st->name);
        cJSON_AddStringToObject(o, "arguments", text);
        emit(st, out, o);
        item = call_item(st->item_id, st->call_id, st->name, text, "completed");
    } else {
        return;
    }
    emit(st, out, ev_item("response.output_item.done", at, cJSON_Duplicate(item, true)));
    if (!item || !cJSON_AddItemToArray(st->output, item))
        out->oom = true;
    st->kind = RS_NONE;
    st->text.len = 0;
    if (st->text.s)
        st->text.s[0] = 0;
    cJSON_Delete(st->lps);
    st->lps = NULL;
}

static void open_item(struct srv_resp_stream *st, struct srv_buf *out, int kind, const char *call_id, const char *name)
{
    close_item(st, out);
    const int at = cJSON_GetArraySize(st->output);
    st->kind = kind;
    if (kind == RS_REASONING) {
        new_id(st->item_id, "rs");
        emit(st, out, ev_item("response.output_item.added", at, reasoning_item(st->item_id, NULL, "in_progress")));
        cJSON *part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "reasoning_text");
        cJSON_AddStringToObject(part, "text", "");
        cJSON *o = ev_at(st, "response.content_part.added", true);
        cJSON_AddItemToObject(o, "part", part);
        emit(st, out, o);
    } else if (kind == RS_MESSAGE) {
        new_id(st->item_id, "msg");
        emit(st, out, ev_item("response.output_item.added", at, message_item(st->item_id, NULL, NULL, "in_progress")));
        cJSON *o = ev_at(st, "response.content_part.added", true);
        cJSON_AddItemToObject(o, "part", text_part("", NULL));
        emit(st, out, o);
        st->lps = cJSON_CreateArray();
    } else {
        new_id(st->item_id, "fc");
        snprintf(st->call_id, sizeof st->call_id, "%s", call_id);
        snprintf(st->name, sizeof st->name, "%s", name);
        emit(st, out, ev_item("response.output_item.added", at, call_item(st->item_id, call_id, name, "", "in_progress")));
    }
}

/* a piece of the reply's content (with its log-probability entries, or NULL): blank pieces are held until text
 * follows (then the message opens with them) or a call does (then they are dropped, as srv_resp_reply drops blank
 * content before calls) */
static void put_text(struct srv_resp_stream *st, struct srv_buf *out, const char *content, const cJSON *lps)
{
    const cJSON *x;
    if (st->kind != RS_MESSAGE && blank(content, strlen(content)) && (*content || st->pend.len == 0)) {
        srv_buf_put(&st->pend, content, strlen(content));
        if (lps && !st->pend_lps)
            st->pend_lps = cJSON_CreateArray();
        cJSON_ArrayForEach(x, lps)
            cJSON_AddItemToArray(st->pend_lps, cJSON_Duplicate(x, true));
        if (st->pend.oom)
            out->oom = true;
        return;
    }
    if (st->kind != RS_MESSAGE)
        open_item(st, out, RS_MESSAGE, NULL, NULL);
    cJSON *all = cJSON_CreateArray();   /* the held entries, then the piece's */
    cJSON_ArrayForEach(x, st->pend_lps)
        cJSON_AddItemToArray(all, cJSON_Duplicate(x, true));
    cJSON_ArrayForEach(x, lps)
        cJSON_AddItemToArray(all, cJSON_Duplicate(x, true));
    cJSON_Delete(st->pend_lps);
    st->pend_lps = NULL;
    srv_buf_put(&st->pend, content, strlen(content));
    const char *piece = st->pend.s ? st->pend.s : "";
    srv_buf_put(&st->text, piece, st->pend.len);
    cJSON *o = ev_at(st, "response.output_text.delta", true);
    cJSON_AddStringToObject(o, "delta", piece);
    cJSON_AddItemToObject(o, "logprobs", cJSON_Duplicate(all, true));
    emit(st, out, o);
    cJSON_ArrayForEach(x, all)
        cJSON_AddItemToArray(st->lps, cJSON_Duplicate(x, true));
    cJSON_Delete(all);
    st->pend.len = 0;
    if (st->pend.s)
        st->pend.s[0] = 0;
    if (st->pend.oom)
        out->oom = true;
}

static void start(struct srv_resp_stream *st, struct srv_buf *out, const cJSON *chunk)
{
    if (st->started)
        return;
    st->started = true;
    const char *model = str_of(chunk, "model");
    snprintf(st->model, sizeof st->model, "%s", model ? model : "");
    for (int k = 0; k < 2; k++) {
        cJSON *o = ev_new(k ? "response.in_progress" : "response.created");
        cJSON_AddItemToObject(o, "response", response_obj(&st->rq, st->model, "in_progress", NULL, NULL, NULL, NULL));
        emit(st, out, o);
    }
}

static void fail_stream(struct srv_resp_stream *st, struct srv_buf *out, const char *code, const char *msg)
{
    close_item(st, out);
    cJSON *o = ev_new("error");
    cJSON_AddStringToObject(o, "code", code);
    cJSON_AddStringToObject(o, "message", msg);
    cJSON_AddNullToObject(o, "param");
    emit(st, out, o);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    o = ev_new("response.failed");
    cJSON *output = st->output;
    st->output = NULL;
    cJSON_AddItemToObject(o, "response", response_obj(&st->rq, st->model, "failed", output, NULL, NULL, e));
    emit(st, out, o);
    st->ended = true;
}

void srv_resp_stream_put(struct srv_resp_stream *st, struct srv_buf *out, cJSON *chunk)
{
    if (!chunk) {
        out->oom = true;
        return;
    }
    if (st->ended) {
        cJSON_Delete(chunk);
        return;
    }
    start(st, out, chunk);
    const cJSON *error = get(chunk, "error");
    if (error) {
        const char *msg = str_of(error, "message");
        fail_stream(st, out, "server_error", msg ? msg : "generation failed");
        cJSON_Delete(chunk);
        return;
    }
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
    const cJSON *d = get(ch, "delta");
    const char *think = str_of(d, "reasoning_content");
    if (think && *think) {
        if (st->kind != RS_REASONING)
            open_item(st, out, RS_REASONING, NULL, NULL);
        st->thought = true;
        srv_buf_put(&st->text, think, strlen(think));
        cJSON *o = ev_at(st, "response.reasoning_text.delta", true);
        cJSON_AddStringToObject(o, "delta", think);
        emit(st, out, o);
    }
    const char *content = str_of(d, "content");
    const cJSON *lps = cJSON_GetObjectItemCaseSensitive(get(ch, "logprobs"), "content");
    if (content && *content) {
        put_text(st, out, content, lps);
    } else if (lps && st->kind == RS_MESSAGE && st->lps) {   /* entries of a piece without text */
        const cJSON *x;
        cJSON_ArrayForEach(x, lps)
            cJSON_AddItemToArray(st->lps, cJSON_Duplicate(x, true));
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, get(d, "tool_calls")) {
        const cJSON *fn = get(c, "function");
        const char *id = str_of(c, "id"), *name = str_of(fn, "name"), *args = str_of(fn, "arguments");
        if (id) {   /* a call's first piece; blank text held before it is not a message */
            open_item(st, out, RS_CALL, id, name ? name : "");
            st->pend.len = 0;
            cJSON_Delete(st->pend_lps);
            st->pend_lps = NULL;
            st->n_calls++;
        }
        if (st->kind == RS_CALL && args && *args) {
            srv_buf_put(&st->text, args, strlen(args));
            cJSON *o = ev_at(st, "response.function_call_arguments.delta", false);
            cJSON_AddStringToObject(o, "delta", args);
            emit(st, out, o);
        }
    }
    const char *finish = str_of(ch, "finish_reason");
    if (finish)
        snprintf(st->finish, sizeof st->finish, "%s", finish);
    if (st->text.oom)
        out->oom = true;
    cJSON_Delete(chunk);
}

void srv_resp_stream_end(struct srv_resp_stream *st, struct srv_buf *out, int prompt_tokens, int completion_tokens,
                         int cached_tokens, int reasoning_tokens)
{
    if (st->ended)
        return;
    if (!st->started) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", "");
        start(st, out, o);
        cJSON_Delete(o);
    }
    if (st->pend.len > 0 && st->n_calls == 0)   /* a reply that is all white space is still its message */
        put_text(st, out, "", NULL);
    close_item(st, out);
    const char *incomplete;
    const char *status = status_of(st->finish, &incomplete);
    if (!strcmp(status, "cancelled")) {
        fail_stream(st, out, "cancelled", "the request was cancelled: the server is shutting down");
        return;
    }
    cJSON *o = ev_new(incomplete ? "response.incomplete" : "response.completed");
    cJSON *output = st->output;
    st->output = NULL;
    cJSON *r = response_obj(&st->rq, st->model, status, output,
                            usage_of(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens), incomplete, NULL);
    srv_resp_keep(&st->rq, r);
    cJSON_AddItemToObject(o, "response", r);
    emit(st, out, o);
    st->ended = true;
}
