/* Chat templates. We do not run Jinja: we recognise the families the models we
 * serve use and render them in C, reproducing what transformers'
 * apply_chat_template renders for their templates (ChatML, Llama 3, and the [INST]
 * formats of Llama 2 and Mistral 7B, render_llama2 / render_mistral below).
 *
 * ChatML (SmolLM2, Qwen2/2.5/3):
 *     [<|im_start|>system\n{default}<|im_end|>\n]   when the template has a default
 *                                                   system prompt and messages[0] is
 *                                                   not a system message
 *     <|im_start|>{role}\n{content}<|im_end|>\n     per message
 *     <|im_start|>assistant\n                        with add_generation_prompt
 *   The default system prompt is read from the template: a string literal
 *   '<|im_start|>system\n...<|im_end|>' with no expression in it (SmolLM2: "You are
 *   a helpful AI assistant named SmolLM, trained by Hugging Face").
 *
 * Llama-3 (3.0):
 *     {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|> ...
 *     <|start_header_id|>assistant<|end_header_id|>\n\n   with add_generation_prompt
 * Llama-3.1 and later (template mentions "Cutting Knowledge Date"): a system block is
 * always rendered first, with the dates the template defaults to (its date_string: 26 Jul
 * 2024, or today's for a template that asks strftime_now, as Llama 3.2's does), holding the
 * system message (trimmed) if messages[0] is one; tools are not rendered there.
 *
 * DeepSeek-R1 (and its distills):
 *     {bos}{the last system message}<｜User｜>{user}<｜Assistant｜>{answer}<｜end▁of▁sentence｜>...
 *     <｜Assistant｜><think>\n                   with add_generation_prompt
 *   an assistant message's text before its last </think> (its thinking) is left out, as the template does;
 *   its tool-call turns are not rendered (the server refuses tool calls for it).
 *
 * Tools (OKV_CHAT_TOOLS_HERMES: a ChatML template that lists tools in <tools></tools> and has replies call
 * them in <tool_call></tool_call>, as Qwen2.5's and Qwen3's do):
 *     <|im_start|>system\n[{system or the default}\n\n]# Tools\n\n...<tools>\n{tool}\n{tool}\n</tools>\n\n
 *         ...</tool_call><|im_end|>\n               the system message (messages[0], if one) goes here
 *     <|im_start|>assistant[\n{content}]\n<tool_call>\n{"name": "{name}", "arguments": {arguments}}\n</tool_call>...
 *         <|im_end|>\n                               an assistant message with tool calls
 *     <|im_start|>user\n<tool_response>\n{content}\n</tool_response>...<|im_end|>\n
 *                                                   a run of "tool" messages, one user turn
 *   as those templates render them (transformers' apply_chat_template with tools=...). */
#include "tok_internal.h"
#include "util/strbuf.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *find_n(const char *hay, const char *needle)
{
    return hay ? strstr(hay, needle) : NULL;
}

/* Look for a literal default system prompt after "<|im_start|>system". */
static char *chatml_default_system(const char *tpl)
{
    static const char head[] = "<|im_start|>system";
    for (const char *p = find_n(tpl, head); p; p = strstr(p + 1, head)) {
        const char *q = p + strlen(head);
        if (q[0] == '\n') q += 1;
        else if (q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *end = strstr(q, "<|im_end|>");
        if (!end || end == q || strcspn(q, "{}'\"+|") < (size_t)(end - q))
            continue;
        char *s = okv_malloc((size_t)(end - q) + 1, OKV_TAG_TOKENIZER);
        if (!s)
            return NULL;
        size_t n = 0;
        for (const char *c = q; c < end; c++) {
            if (c[0] == '\\' && c + 1 < end && c[1] == 'n') {
                s[n++] = '\n';
                c++;
            } else {
                s[n++] = *c;
            }
        }
        s[n] = '\0';
        return s;
    }
    return NULL;
}

void okv_chat_detect(okv_tokenizer *t)
{
    const char *tpl = t->chat_template;
    t->chat_format = OKV_CHAT_FORMAT_NONE;
    if (tpl && strstr(tpl, "<|im_start|>"))
        t->chat_format = OKV_CHAT_FORMAT_CHATML;
    else if (tpl && strstr(tpl, "<|start_header_id|>"))
        t->chat_format = OKV_CHAT_FORMAT_LLAMA3;
    else if (tpl && strstr(tpl, "<｜User｜>") && strstr(tpl, "<｜Assistant｜>"))
        t->chat_format = OKV_CHAT_FORMAT_DEEPSEEK_R1;
    else if (tpl && strstr(tpl, "[INST]") && strstr(tpl, "<<SYS>>"))
        t->chat_format = OKV_CHAT_FORMAT_LLAMA2;
    else if (tpl && strstr(tpl, "[INST]") && (strstr(tpl, "' [/INST]'") || strstr(tpl, "\" [/INST]\"")))
        t->chat_format = OKV_CHAT_FORMAT_MISTRAL;
    else if (tpl && strstr(tpl, "[INST]") && strstr(tpl, "[/INST]"))
        t->chat_format = OKV_CHAT_FORMAT_MISTRAL3;
    else if (!tpl && okv_tok_lookup(t, "<|im_start|>", 12) >= 0 && okv_tok_lookup(t, "<|im_end|>", 10) >= 0)
        t->chat_format = OKV_CHAT_FORMAT_CHATML;
    else if (!tpl && okv_tok_lookup(t, "<|start_header_id|>", 19) >= 0 && okv_tok_lookup(t, "<|eot_id|>", 10) >= 0)
        t->chat_format = OKV_CHAT_FORMAT_LLAMA3;
    if (t->chat_format == OKV_CHAT_FORMAT_CHATML)
        t->chat_default_system = chatml_default_system(tpl);
    if (t->chat_format == OKV_CHAT_FORMAT_LLAMA3) {
        t->chat_llama31 = tpl && strstr(tpl, "Cutting Knowledge Date");
        t->chat_today = t->chat_llama31 && strstr(tpl, "strftime_now");
    }
    t->chat_tools = OKV_CHAT_TOOLS_NONE;
    if (t->chat_format == OKV_CHAT_FORMAT_CHATML && tpl && strstr(tpl, "<tools>") && strstr(tpl, "<tool_call>") &&
        strstr(tpl, "<tool_response>") && strstr(tpl, "# Tools"))
        t->chat_tools = OKV_CHAT_TOOLS_HERMES;
    if (t->chat_format == OKV_CHAT_FORMAT_LLAMA3 && t->chat_llama31 && strstr(tpl, "Environment: ipython") &&
        strstr(tpl, "tools_in_user_message") && strstr(tpl, "\"parameters\": "))
        t->chat_tools = OKV_CHAT_TOOLS_LLAMA31;
    /* Qwen3's reasoning templates: the last user query found (ns.last_query_index) to keep later thinking; the
     * switch and the opening <think> are read from the Jinja text, where the string literal writes \n */
    t->chat_think_history = t->chat_think_switch = t->chat_think_opens = false;
    if (t->chat_format == OKV_CHAT_FORMAT_CHATML && tpl) {
        t->chat_think_history = strstr(tpl, "last_query_index") && strstr(tpl, "reasoning_content") &&
                                strstr(tpl, "</think>");
        t->chat_think_switch = strstr(tpl, "enable_thinking is defined and enable_thinking is false") != NULL;
        t->chat_think_opens = strstr(tpl, "'<|im_start|>assistant\\n<think>\\n'") != NULL;
    }
}

bool okv_tokenizer_chat_thinking_switch(const okv_tokenizer *t) { return t->chat_think_switch; }

enum okv_status okv_chat_template_kwargs(const char *json, size_t len, struct okv_chat_opts *opts)
{
    cJSON *o = cJSON_ParseWithLength(json, len);
    enum okv_status st = OKV_OK;
    if (!cJSON_IsObject(o)) {
        st = okv_set_error(OKV_ERR_INVALID_ARG, "chat_template_kwargs must be a JSON object, e.g. "
                           "{\"enable_thinking\": false}");
    } else {
        const cJSON *x;
        cJSON_ArrayForEach(x, o) {
            if (!strcmp(x->string, "date_string")) {
                if (!cJSON_IsString(x) || strlen(x->valuestring) >= sizeof opts->date_string) {
                    st = okv_set_error(OKV_ERR_INVALID_ARG, "chat_template_kwargs: date_string must be a string of "
                                       "under %zu bytes", sizeof opts->date_string);
                    break;
                }
                snprintf(opts->date_string, sizeof opts->date_string, "%s", x->valuestring);
                continue;
            }
            if (strcmp(x->string, "enable_thinking") != 0) {
                st = okv_set_error(OKV_ERR_INVALID_ARG, "chat_template_kwargs: '%.60s' is not a variable OasisKV's "
                                   "chat templates read (it renders them in C; known: enable_thinking, date_string)",
                                   x->string);
                break;
            }
            if (!cJSON_IsBool(x)) {
                st = okv_set_error(OKV_ERR_INVALID_ARG, "chat_template_kwargs: enable_thinking must be true or false");
                break;
            }
            opts->enable_thinking = cJSON_IsTrue(x);
        }
    }
    cJSON_Delete(o);
    return st;
}

enum okv_chat_tools okv_tokenizer_chat_tools(const okv_tokenizer *t) { return t->chat_tools; }

enum okv_status okv_tokenizer_set_chat_template(okv_tokenizer *t, const char *tpl, size_t len)
{
    enum okv_status st = okv_tok_set_chat_template(t, tpl, len);
    if (st != OKV_OK)
        return st;
    okv_free(t->chat_default_system);
    t->chat_default_system = NULL;
    t->chat_llama31 = t->chat_today = false;
    okv_chat_detect(t);   /* (sets every other chat_* field) */
    return OKV_OK;
}

/* the rendering's text (util/strbuf.h) */
static void put(struct okv_strbuf *b, const char *s) { okv_sb_puts(b, s); }

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Jinja's |trim (leading and trailing whitespace). */
static void put_trimmed(struct okv_strbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n && is_ws(*s)) { s++; n--; }
    while (n && is_ws(s[n - 1])) n--;
    okv_sb_put(b, s, n);
}

/* the last occurrence of needle in s[0..n), or NULL */
static const char *last_in(const char *s, size_t n, const char *needle)
{
    const size_t k = strlen(needle);
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, needle, k))
            return s + i;
    return NULL;
}

static void put_tool_calls(const struct okv_chat_msg *mi, bool first_nl, struct okv_strbuf *b)
{
    for (int k = 0; k < mi->n_tool_calls; k++) {
        if (k > 0 || first_nl)
            put(b, "\n");
        put(b, "<tool_call>\n{\"name\": \"");
        put(b, mi->tool_calls[k].name);
        put(b, "\", \"arguments\": ");
        put(b, mi->tool_calls[k].arguments);
        put(b, "}\n</tool_call>");
    }
}

/* Qwen3's answer: its thinking is reasoning_content if given, else the text between the last <think> before the
 * first </think> and that </think> (newlines at its ends dropped), the answer then being the text after the last
 * </think> (leading newlines dropped). After the last user query (after_query), the last message and any with
 * thinking render it as "<think>\n{thinking, newlines stripped}\n</think>\n\n{answer, leading newlines
 * dropped}"; the others, and all before the query, render the answer alone. */
static void render_qwen3_answer(const struct okv_chat_msg *mi, bool after_query, bool last, struct okv_strbuf *b)
{
    const char *c = mi->content, *r = "", *r_end = r;
    if (mi->reasoning_content) {
        r = mi->reasoning_content;
        r_end = r + strlen(r);
    } else {
        const char *close = strstr(c, "</think>");
        if (close) {
            r_end = close;
            while (r_end > c && r_end[-1] == '\n')
                r_end--;
            const char *open = last_in(c, (size_t)(r_end - c), "<think>");
            r = open ? open + strlen("<think>") : c;
            while (r < r_end && *r == '\n')
                r++;
            c = last_in(c, strlen(c), "</think>") + strlen("</think>");
            while (*c == '\n')
                c++;
        }
    }
    put(b, "<|im_start|>assistant\n");
    if (after_query && (last || r_end > r)) {
        const char *rs = r, *re = r_end, *cs = c;
        while (rs < re && *rs == '\n')
            rs++;
        while (re > rs && re[-1] == '\n')
            re--;
        while (*cs == '\n')
            cs++;
        put(b, "<think>\n");
        okv_sb_put(b, rs, (size_t)(re - rs));
        put(b, "\n</think>\n\n");
        put(b, cs);
    } else {
        put(b, c);
    }
    put_tool_calls(mi, c[0] != '\0', b);
    put(b, "<|im_end|>\n");
}

/* ns.last_query_index of Qwen3's template: the last user message that is not a wrapped tool response, else the
 * last message */
static size_t last_query(const struct okv_chat_msg *m, size_t n)
{
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    for (size_t i = n; i-- > 0;) {
        if (strcmp(m[i].role, "user") != 0)
            continue;
        const size_t len = strlen(m[i].content);
        const bool wrapped = len >= strlen(open) && !strncmp(m[i].content, open, strlen(open)) &&
                             len >= strlen(close) && !strcmp(m[i].content + len - strlen(close), close);
        if (!wrapped)
            return i;
    }
    return n ? n - 1 : 0;
}

static void render_chatml(const okv_tokenizer *t, const struct okv_chat_msg *m, size_t n, const char *const *tools,
                          size_t n_tools, bool gen, int enable_thinking, struct okv_strbuf *b)
{
    const size_t query = t->chat_think_history ? last_query(m, n) : 0;
    size_t first = 0;
    if (n_tools > 0) {   /* the tools' system block, holding the system message */
        const char *sys = n > 0 && strcmp(m[0].role, "system") == 0 ? m[0].content : t->chat_default_system;
        first = n > 0 && strcmp(m[0].role, "system") == 0;
        put(b, "<|im_start|>system\n");
        if (sys) {
            put(b, sys);
            put(b, "\n\n");
        }
        put(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
        for (size_t k = 0; k < n_tools; k++) {
            put(b, "\n");
            put(b, tools[k]);
        }
        put(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
               "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
               "<args-json-object>}\n</tool_call><|im_end|>\n");
    } else if (t->chat_default_system && n > 0 && strcmp(m[0].role, "system") != 0) {
        put(b, "<|im_start|>system\n");
        put(b, t->chat_default_system);
        put(b, "<|im_end|>\n");
    }
    for (size_t i = first; i < n; i++) {
        if (strcmp(m[i].role, "tool") == 0) {   /* a run of tool results: one user turn */
            if (i == 0 || strcmp(m[i - 1].role, "tool") != 0)
                put(b, "<|im_start|>user");
            put(b, "\n<tool_response>\n");
            put(b, m[i].content);
            put(b, "\n</tool_response>");
            if (i + 1 == n || strcmp(m[i + 1].role, "tool") != 0)
                put(b, "<|im_end|>\n");
            continue;
        }
        if (t->chat_think_history && strcmp(m[i].role, "assistant") == 0) {
            render_qwen3_answer(&m[i], i > query, i + 1 == n, b);
            continue;
        }
        put(b, "<|im_start|>");
        put(b, m[i].role);
        if (m[i].n_tool_calls > 0) {
            if (m[i].content[0]) {
                put(b, "\n");
                put(b, m[i].content);
            }
            put_tool_calls(&m[i], true, b);
            put(b, "<|im_end|>\n");
            continue;
        }
        put(b, "\n");
        put(b, m[i].content);
        put(b, "<|im_end|>\n");
    }
    if (gen) {
        put(b, "<|im_start|>assistant\n");
        if (t->chat_think_opens)
            put(b, "<think>\n");
        if (t->chat_think_switch && enable_thinking == 0)
            put(b, "<think>\n\n</think>\n\n");
    }
}

static void render_llama3(const okv_tokenizer *t, const struct okv_chat_msg *m, size_t n, const char *const *tools,
                          size_t n_tools, bool gen, const char *date, struct okv_strbuf *b)
{
    const char *bos = t->bos_text ? t->bos_text : "";
    size_t first = 0;
    if (t->chat_llama31) {
        put(b, bos);
        put(b, "<|start_header_id|>system<|end_header_id|>\n\n");
        if (n_tools > 0)
            put(b, "Environment: ipython\n");
        put(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
        put(b, date);
        put(b, "\n\n");
        if (n > 0 && strcmp(m[0].role, "system") == 0) {
            put_trimmed(b, m[0].content);
            first = 1;
        }
        put(b, "<|eot_id|>");
        if (n_tools > 0) {   /* the tools go into the first message after the system one (the caller checked it is there) */
            put(b, "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a "
                   "JSON for a function call with its proper arguments that best answers the given prompt.\n\n"
                   "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and "
                   "its value}.Do not use variables.\n\n");
            for (size_t k = 0; k < n_tools; k++) {
                put(b, tools[k]);
                put(b, "\n\n");
            }
            put_trimmed(b, m[first].content);
            put(b, "<|eot_id|>");
            first++;
        }
    } else if (n > 0) {
        put(b, bos);
    }
    for (size_t i = first; i < n; i++) {
        if (t->chat_tools == OKV_CHAT_TOOLS_LLAMA31 && m[i].n_tool_calls > 0) {   /* one call (checked) */
            put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            put(b, m[i].tool_calls[0].name);
            put(b, "\", \"parameters\": ");
            put(b, m[i].tool_calls[0].arguments);
            put(b, "}<|eot_id|>");
            continue;
        }
        if (t->chat_tools == OKV_CHAT_TOOLS_LLAMA31 && strcmp(m[i].role, "tool") == 0) {
            put(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            put(b, m[i].content);
            put(b, "<|eot_id|>");
            continue;
        }
        put(b, "<|start_header_id|>");
        put(b, m[i].role);
        put(b, "<|end_header_id|>\n\n");
        put_trimmed(b, m[i].content);
        put(b, "<|eot_id|>");
    }
    if (gen)
        put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_deepseek_r1(const okv_tokenizer *t, const struct okv_chat_msg *m, size_t n, bool gen, struct okv_strbuf *b)
{
    put(b, t->bos_text ? t->bos_text : "");
    for (size_t i = n; i-- > 0;)   /* the last system message, wherever it is */
        if (strcmp(m[i].role, "system") == 0) {
            put(b, m[i].content);
            break;
        }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].role, "user") == 0) {
            put(b, "<｜User｜>");
            put(b, m[i].content);
        } else if (strcmp(m[i].role, "assistant") == 0) {
            const char *c = m[i].content, *think;
            while ((think = strstr(c, "</think>")))   /* the answer after the last </think> */
                c = think + strlen("</think>");
            put(b, "<｜Assistant｜>");
            put(b, c);
            put(b, "<｜end▁of▁sentence｜>");
        }
    }
    if (gen)
        put(b, "<｜Assistant｜><think>\n");
}

/* [INST] formats: an optional system message, then user and assistant turns alternating from a
 * user turn (the templates raise an exception otherwise) */
static enum okv_status inst_roles(const okv_tokenizer *t, const struct okv_chat_msg *m, size_t n, size_t *first)
{
    *first = n > 0 && strcmp(m[0].role, "system") == 0;
    for (size_t i = *first; i < n; i++) {
        const char *want = (i - *first) % 2 == 0 ? "user" : "assistant";
        if (strcmp(m[i].role, want) != 0)
            return okv_set_error(OKV_ERR_INVALID_ARG,
                                 "%s: chat message %zu has role \"%s\": after an optional system message this model's "
                                 "template needs user and assistant turns alternating, from a user turn",
                                 t->src, i, m[i].role);
    }
    return OKV_OK;
}

/* Python's str.strip() (as the Llama 2 template calls it): whitespace at both ends */
static void put_stripped(struct okv_strbuf *b, const char *s) { put_trimmed(b, s); }

/* Llama 2 chat:
 *     {bos}[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user.strip()} [/INST] {assistant.strip()} {eos}{bos}[INST] ...
 * the system block inside the first user turn (content = block + user, then stripped) */
static void render_llama2(const okv_tokenizer *t, const struct okv_chat_msg *m, size_t n, size_t first, struct okv_strbuf *b)
{
    const char *bos = t->bos_text ? t->bos_text : "";
    const char *eos = t->eos >= 0 ? t->arena + t->tok_off[t->eos] : "";
    for (size_t i = first; i < n; i++) {
        if (strcmp(m[i].role, "user") == 0) {
            put(b, bos);
            put(b, "[INST] ");
            if (i == first && first == 1) {   /* '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content, stripped */
                struct okv_strbuf c = {.tag = OKV_TAG_TOKENIZER};
                put(&c, "<<SYS>>\n");
                put(&c, m[0].content);
                put(&c, "\n<</SYS>>\n\n");
                put(&c, m[i].content);
                if (c.oom)
                    b->oom = true;
                else
                    put_stripped(b, c.s);
                okv_free(c.s);
            } else {
                put_stripped(b, m[i].content);
            }
            put(b, " [/INST]");
        } else {
            put(b, " ");
            put_stripped(b, m[i].content);
            put(b, " ");
            put(b, eos);
        }
    }
}

/* Mistral 7B Instruct v0.1 / v0.2:  {bos}[INST] {user} [/INST]{assistant}{eos}[INST] ...
 * (the template has no system role: a system message is put before the first user turn's
 * text, with a blank line, as the v0.3 template does for the last one).
 * v0.3:  {bos}[INST] {user}[/INST] {assistant|trim}{eos}[INST] ...  with the system message
 * before the last user turn's text ("[INST] {system}\n\n{user}[/INST]"). */
static void render_mistral(const okv_tokenizer *t, const struct okv_chat_msg *m, size_t n, size_t first, bool v3,
                           struct okv_strbuf *b)
{
    const char *eos = t->eos >= 0 ? t->arena + t->tok_off[t->eos] : "";
    size_t last_user = n;
    for (size_t i = first; i < n; i++)
        if (strcmp(m[i].role, "user") == 0)
            last_user = i;
    put(b, t->bos_text ? t->bos_text : "");
    for (size_t i = first; i < n; i++) {
        if (strcmp(m[i].role, "user") == 0) {
            put(b, "[INST] ");
            if (first == 1 && i == (v3 ? last_user : first)) {
                put(b, m[0].content);
                put(b, "\n\n");
            }
            put(b, m[i].content);
            put(b, v3 ? "[/INST]" : " [/INST]");
        } else if (v3) {
            put(b, " ");
            put_trimmed(b, m[i].content);
            put(b, eos);
        } else {
            put(b, m[i].content);
            put(b, eos);
        }
    }
}

enum okv_status okv_tokenizer_apply_chat(const okv_tokenizer *t, const struct okv_chat_msg *msgs,
                                         size_t n, bool add_generation_prompt, char **out)
{
    return okv_tokenizer_apply_chat_tools(t, msgs, n, NULL, 0, add_generation_prompt, out);
}

enum okv_status okv_tokenizer_apply_chat_tools(const okv_tokenizer *t, const struct okv_chat_msg *msgs, size_t n,
                                               const char *const *tools, size_t n_tools, bool add_generation_prompt,
                                               char **out)
{
    const struct okv_chat_opts o = {.tools = tools, .n_tools = n_tools, .add_generation_prompt = add_generation_prompt,
                                    .enable_thinking = -1};
    return okv_tokenizer_render_chat(t, msgs, n, &o, out);
}

/* continue_final_message as transformers does it: a tag after the last message's content, the text cut before the
 * tag (and, where the template trimmed the space that ends the tag, before the whitespace in front of it) */
#define CONTINUE_TAG "CONTINUE_FINAL_MESSAGE_TAG "
static enum okv_status render_continued(const okv_tokenizer *t, const struct okv_chat_msg *msgs, size_t n,
                                        const struct okv_chat_opts *opts, char **out)
{
    *out = NULL;
    if (n == 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "continue_final_message: the conversation is empty");
    if (!msgs[n - 1].content)
        return okv_set_error(OKV_ERR_INVALID_ARG, "chat message %zu has no content", n - 1);
    struct okv_chat_msg *m = okv_malloc(sizeof *m * n, OKV_TAG_TOKENIZER);
    const size_t cl = strlen(msgs[n - 1].content);
    char *tagged = okv_malloc(cl + sizeof CONTINUE_TAG, OKV_TAG_TOKENIZER);
    if (!m || !tagged) {
        okv_free(m);
        okv_free(tagged);
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory rendering a chat", t->src);
    }
    memcpy(m, msgs, sizeof *m * n);
    memcpy(tagged, msgs[n - 1].content, cl);
    memcpy(tagged + cl, CONTINUE_TAG, sizeof CONTINUE_TAG);
    m[n - 1].content = tagged;
    struct okv_chat_opts o = *opts;
    o.continue_final_message = false;
    char *text = NULL;
    enum okv_status st = okv_tokenizer_render_chat(t, m, n, &o, &text);
    okv_free(tagged);
    okv_free(m);
    if (st != OKV_OK)
        return st;
    static const char tag[] = "CONTINUE_FINAL_MESSAGE_TAG";
    const char *at = last_in(text, strlen(text), tag);
    if (!at) {
        okv_free(text);
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: continue_final_message, but the chat template drops the end "
                             "of the final message", t->src);
    }
    size_t keep = (size_t)(at - text);
    if (at[strlen(tag)] != ' ')   /* the template trimmed the message's end */
        while (keep > 0 && is_ws(text[keep - 1]))
            keep--;
    text[keep] = '\0';
    *out = text;
    return OKV_OK;
}

enum okv_status okv_tokenizer_render_chat(const okv_tokenizer *t, const struct okv_chat_msg *msgs, size_t n,
                                          const struct okv_chat_opts *opts, char **out)
{
    if (opts->continue_final_message)
        return render_continued(t, msgs, n, opts, out);
    const char *const *tools = opts->tools;
    const size_t n_tools = opts->n_tools;
    const bool add_generation_prompt = opts->add_generation_prompt;
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return okv_set_error(OKV_ERR_INVALID_ARG, "chat message %zu has no %s", i,
                                 msgs[i].role ? "content" : "role");
        for (int k = 0; k < msgs[i].n_tool_calls; k++)
            if (!msgs[i].tool_calls[k].name || !msgs[i].tool_calls[k].arguments)
                return okv_set_error(OKV_ERR_INVALID_ARG, "chat message %zu: tool call %d has no %s", i, k,
                                     msgs[i].tool_calls[k].name ? "arguments" : "name");
        if (t->chat_tools == OKV_CHAT_TOOLS_NONE && (msgs[i].n_tool_calls > 0 || strcmp(msgs[i].role, "tool") == 0))
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: chat message %zu %s, and this model's chat template does not "
                                 "render tool calls", t->src, i,
                                 msgs[i].n_tool_calls > 0 ? "has tool calls" : "is a tool's result");
    }
    for (size_t k = 0; k < n_tools; k++)
        if (!tools || !tools[k])
            return okv_set_error(OKV_ERR_INVALID_ARG, "tool %zu has no definition", k);
    if (n_tools > 0 && t->chat_tools == OKV_CHAT_TOOLS_NONE)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: this model's chat template does not render tools", t->src);
    struct okv_strbuf b = {.tag = OKV_TAG_TOKENIZER};
    switch (t->chat_format) {
    case OKV_CHAT_FORMAT_CHATML:
        render_chatml(t, msgs, n, tools, n_tools, add_generation_prompt, opts->enable_thinking, &b);
        break;
    case OKV_CHAT_FORMAT_LLAMA3: {
        if (t->chat_tools == OKV_CHAT_TOOLS_LLAMA31) {
            const size_t first = n > 0 && strcmp(msgs[0].role, "system") == 0;
            if (n_tools > 0 && first >= n)
                return okv_set_error(OKV_ERR_INVALID_ARG, "%s: this model's template puts the tools into the first "
                                     "message after the system one, and there is none", t->src);
            for (size_t i = 0; i < n; i++)
                if (msgs[i].n_tool_calls > 1)
                    return okv_set_error(OKV_ERR_UNSUPPORTED, "chat message %zu has %d tool calls: this model's template "
                                         "takes one a message", i, msgs[i].n_tool_calls);
        }
        char today[64] = "26 Jul 2024";   /* the date_string the template sets when it is not given */
        if (t->chat_today) {             /* strftime_now("%d %b %Y"): transformers' datetime.now(), local time */
            const time_t now = time(NULL);
            struct tm tm;
            if (localtime_r(&now, &tm))
                strftime(today, sizeof today, "%d %b %Y", &tm);
        }
        render_llama3(t, msgs, n, tools, n_tools, add_generation_prompt, opts->date_string[0] ? opts->date_string : today,
                      &b);
        break;
    }
    case OKV_CHAT_FORMAT_LLAMA2:
    case OKV_CHAT_FORMAT_MISTRAL:
    case OKV_CHAT_FORMAT_MISTRAL3: {   /* these templates have no generation prompt: the text ends with [/INST] */
        size_t first;
        enum okv_status st = inst_roles(t, msgs, n, &first);
        if (st != OKV_OK)
            return st;
        if (t->chat_format == OKV_CHAT_FORMAT_LLAMA2)
            render_llama2(t, msgs, n, first, &b);
        else
            render_mistral(t, msgs, n, first, t->chat_format == OKV_CHAT_FORMAT_MISTRAL3, &b);
        break;
    }
    case OKV_CHAT_FORMAT_DEEPSEEK_R1: render_deepseek_r1(t, msgs, n, add_generation_prompt, &b); break;
    case OKV_CHAT_FORMAT_NONE:
    default:
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: no known chat format (template: %s)", t->src,
                             t->chat_template ? "not ChatML, Llama-3, Llama-2, Mistral [INST] or DeepSeek-R1" : "none");
    }
    put(&b, "");                /* an empty conversation still yields "" */
    if (b.oom) {
        okv_free(b.s);
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory rendering a chat", t->src);
    }
    *out = b.s;
    return OKV_OK;
}
