/* Tools (function calling): see tools.h. */
#include "server/tools.h"

#include "oasiskv/common.h"
#include "oasiskv/sampling.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CALL_OPEN "<tool_call>"
#define CALL_CLOSE "</tool_call>"

/* ---- Python's json.dumps ---- */

static void py_string(const char *s, struct srv_buf *b)
{
    srv_buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *esc = NULL;
        char u[8];
        switch (*p) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (*p < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", *p);
                esc = u;
            }
        }
        if (esc)
            srv_buf_put(b, esc, strlen(esc));
        else
            srv_buf_put(b, (const char *)p, 1);
    }
    srv_buf_put(b, "\"", 1);
}

/* Python's repr of a finite double: the shortest digits that read back as it, in fixed notation when the
 * decimal exponent is in [-4, 16), else as d.ddde[+-]XX */
static void py_float(double v, struct srv_buf *b)
{
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    const bool neg = e[0] == '-';
    char digits[24];
    int nd = 0;
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    const int exp = atoi(p + 1);
    char out[64];
    int n = 0;
    if (neg)
        out[n++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out[n++] = '0';
            out[n++] = '.';
            for (int i = 0; i < -exp - 1; i++)
                out[n++] = '0';
            for (int i = 0; i < nd; i++)
                out[n++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++)
                out[n++] = i < nd ? digits[i] : '0';
            out[n++] = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++)
                    out[n++] = digits[i];
            else
                out[n++] = '0';
        }
        out[n] = 0;
    } else {
        out[n++] = digits[0];
        if (nd > 1) {
            out[n++] = '.';
            for (int i = 1; i < nd; i++)
                out[n++] = digits[i];
        }
        n += snprintf(out + n, sizeof out - (size_t)n, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    srv_buf_put(b, out, strlen(out));
}

/* a newline and the indentation of `level` (indent > 0) */
static void py_newline(struct srv_buf *b, int indent, int level)
{
    srv_buf_put(b, "\n", 1);
    for (int i = 0; i < indent * level; i++)
        srv_buf_put(b, " ", 1);
}

static void pyjson_at(const cJSON *v, struct srv_buf *b, int indent, int level)
{
    const bool obj = cJSON_IsObject(v);
    if (obj || cJSON_IsArray(v)) {
        srv_buf_put(b, obj ? "{" : "[", 1);
        const cJSON *x;
        bool first = true;
        cJSON_ArrayForEach(x, v) {
            if (!first)
                srv_buf_put(b, indent > 0 ? "," : ", ", indent > 0 ? 1 : 2);
            if (indent > 0)
                py_newline(b, indent, level + 1);
            first = false;
            if (obj) {
                py_string(x->string ? x->string : "", b);
                srv_buf_put(b, ": ", 2);
            }
            pyjson_at(x, b, indent, level + 1);
        }
        if (indent > 0 && !first)
            py_newline(b, indent, level);
        srv_buf_put(b, obj ? "}" : "]", 1);
    } else if (cJSON_IsString(v)) {
        py_string(v->valuestring, b);
    } else if (cJSON_IsNumber(v)) {
        const double d = v->valuedouble;
        if (!isfinite(d)) {
            srv_buf_put(b, isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity", isnan(d) ? 3 : d > 0 ? 8 : 9);
        } else if (d == floor(d) && fabs(d) < 9007199254740992.0) {   /* a JSON integer (2^53: exactly one) */
            srv_buf_printf(b, "%.0f", d);
        } else {
            py_float(d, b);
        }
    } else if (cJSON_IsTrue(v)) {
        srv_buf_put(b, "true", 4);
    } else if (cJSON_IsFalse(v)) {
        srv_buf_put(b, "false", 5);
    } else {
        srv_buf_put(b, "null", 4);
    }
}

void srv_pyjson(const cJSON *v, struct srv_buf *b) { pyjson_at(v, b, 0, 0); }
void srv_pyjson_indent(const cJSON *v, struct srv_buf *b, int indent) { pyjson_at(v, b, indent, 0); }

char *srv_pyjson_text(const cJSON *v, int indent)
{
    struct srv_buf b = {0};
    pyjson_at(v, &b, indent, 0);
    srv_buf_put(&b, "", 1);
    if (b.oom) {
        okv_free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- JSON text as json.dumps writes it, read as it comes ---- */

enum { PJ_VALUE, PJ_VALUE_OR_END, PJ_KEY, PJ_KEY_OR_END, PJ_COLON, PJ_AFTER, PJ_STR, PJ_ESC, PJ_UESC, PJ_NUM, PJ_LIT };

static void put_cp(struct srv_buf *b, uint32_t cp)   /* a decoded code point of a string, as json.dumps writes it */
{
    char u[8];
    switch (cp) {
    case '"': srv_buf_put(b, "\\\"", 2); return;
    case '\\': srv_buf_put(b, "\\\\", 2); return;
    case '\n': srv_buf_put(b, "\\n", 2); return;
    case '\r': srv_buf_put(b, "\\r", 2); return;
    case '\t': srv_buf_put(b, "\\t", 2); return;
    case '\b': srv_buf_put(b, "\\b", 2); return;
    case '\f': srv_buf_put(b, "\\f", 2); return;
    default: break;
    }
    if (cp < 0x20) {
        snprintf(u, sizeof u, "\\u%04x", (unsigned)cp);
        srv_buf_put(b, u, 6);
        return;
    }
    int n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    srv_buf_put(b, u, (size_t)n);
}

/* A number's text (JSON's grammar checked) as Python writes what json.loads reads from it: an integer
 * literal as the int it is (all its digits; -0 is 0), one with a fraction or exponent as the float's repr. */
static bool put_number(const char *t, int n, struct srv_buf *b)
{
    int i = 0;
    if (i < n && t[i] == '-')
        i++;
    if (i >= n || t[i] < '0' || t[i] > '9')
        return false;
    if (t[i] == '0')
        i++;
    else
        while (i < n && t[i] >= '0' && t[i] <= '9')
            i++;
    const int int_end = i;
    if (i < n && t[i] == '.') {
        if (++i >= n || t[i] < '0' || t[i] > '9')
            return false;
        while (i < n && t[i] >= '0' && t[i] <= '9')
            i++;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-'))
            i++;
        if (i >= n || t[i] < '0' || t[i] > '9')
            return false;
        while (i < n && t[i] >= '0' && t[i] <= '9')
            i++;
    }
    if (i != n)
        return false;
    if (int_end == n) {   /* an integer */
        if (n == 2 && t[0] == '-' && t[1] == '0')
            srv_buf_put(b, "0", 1);
        else
            srv_buf_put(b, t, (size_t)n);
        return true;
    }
    char z[48];
    memcpy(z, t, (size_t)n);
    z[n] = 0;
    const double d = strtod(z, NULL);
    if (isinf(d))
        srv_buf_put(b, d > 0 ? "Infinity" : "-Infinity", d > 0 ? 8 : 9);
    else
        py_float(d, b);
    return true;
}

static void pj_after_value(struct srv_pyjson_rd *r)
{
    r->st = PJ_AFTER;
    if (r->depth == 0)
        r->done = true;
}

size_t srv_pyjson_feed(struct srv_pyjson_rd *r, const char *p, size_t n, bool final, struct srv_buf *out)
{
    size_t i = 0;
    for (; i < n && !r->done && !r->bad; i++) {
        const unsigned char c = (unsigned char)p[i];
        const bool ws = c == ' ' || c == '\n' || c == '\r' || c == '\t';
        switch (r->st) {
        case PJ_NUM:
        case PJ_LIT:
            if (r->st == PJ_NUM ? (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
                                : c >= 'a' && c <= 'z') {
                if (r->nt >= (int)sizeof r->tok - 1)
                    r->bad = true;
                else
                    r->tok[r->nt++] = (char)c;
                continue;
            }
            if (r->st == PJ_NUM ? !put_number(r->tok, r->nt, out)
                                : !((r->nt == 4 && !memcmp(r->tok, "true", 4)) || (r->nt == 5 && !memcmp(r->tok, "false", 5)) ||
                                    (r->nt == 4 && !memcmp(r->tok, "null", 4)))) {
                r->bad = true;
                continue;
            }
            if (r->st == PJ_LIT)
                srv_buf_put(out, r->tok, (size_t)r->nt);
            pj_after_value(r);
            if (r->done)
                return i;   /* the character after the value is not the value's */
            i--;            /* read it again, after the value */
            continue;
        case PJ_STR:
            if (r->hi && c != '\\') {   /* a high surrogate not followed by its low half */
                r->bad = true;
            } else if (c == '"') {
                srv_buf_put(out, "\"", 1);
                if (r->in_key) {
                    r->in_key = false;
                    r->st = PJ_COLON;
                } else {
                    pj_after_value(r);
                }
            } else if (c == '\\') {
                r->st = PJ_ESC;
            } else if (c < 0x20) {   /* json.loads (strict) refuses raw control characters */
                r->bad = true;
            } else {
                srv_buf_put(out, (const char *)&p[i], 1);
            }
            continue;
        case PJ_ESC: {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *at = c ? strchr(from, c) : NULL;
            if (c == 'u') {
                r->st = PJ_UESC;
                r->nt = 0;
            } else if (at && !r->hi) {
                put_cp(out, (unsigned char)to[at - from]);
                r->st = PJ_STR;
            } else {
                r->bad = true;
            }
            continue;
        }
        case PJ_UESC: {
            const int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (h < 0) {
                r->bad = true;
                continue;
            }
            r->tok[r->nt++] = (char)h;
            if (r->nt < 4)
                continue;
            uint32_t cp = (uint32_t)(r->tok[0] << 12 | r->tok[1] << 8 | r->tok[2] << 4 | r->tok[3]);
            r->nt = 0;
            r->st = PJ_STR;
            if (r->hi) {
                if (cp < 0xDC00 || cp > 0xDFFF) {
                    r->bad = true;
                    continue;
                }
                cp = 0x10000 + ((r->hi - 0xD800) << 10) + (cp - 0xDC00);
                r->hi = 0;
            } else if (cp >= 0xD800 && cp <= 0xDBFF) {
                r->hi = cp;
                continue;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {   /* a lone low surrogate: not UTF-8 text */
                r->bad = true;
                continue;
            }
            put_cp(out, cp);
            continue;
        }
        default:
            break;
        }
        if (ws)
            continue;
        switch (r->st) {
        case PJ_VALUE_OR_END:
        case PJ_KEY_OR_END:
            if (c == (r->st == PJ_KEY_OR_END ? '}' : ']')) {
                srv_buf_put(out, (const char *)&p[i], 1);
                r->depth--;
                pj_after_value(r);
                continue;
            }
            if (r->st == PJ_KEY_OR_END)
                goto key;
            /* fall through */
        case PJ_VALUE:
            if (c == '{' || c == '[') {
                if (r->depth >= (int)sizeof r->stack) {
                    r->bad = true;
                    continue;
                }
                r->stack[r->depth++] = (char)c;
                srv_buf_put(out, (const char *)&p[i], 1);
                r->st = c == '{' ? PJ_KEY_OR_END : PJ_VALUE_OR_END;
            } else if (c == '"') {
                srv_buf_put(out, "\"", 1);
                r->st = PJ_STR;
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                r->st = PJ_NUM;
                r->tok[0] = (char)c;
                r->nt = 1;
            } else if (c >= 'a' && c <= 'z') {
                r->st = PJ_LIT;
                r->tok[0] = (char)c;
                r->nt = 1;
            } else {
                r->bad = true;
            }
            continue;
        case PJ_KEY:
        key:
            if (c == '"') {
                srv_buf_put(out, "\"", 1);
                r->in_key = true;
                r->st = PJ_STR;
            } else {
                r->bad = true;
            }
            continue;
        case PJ_COLON:
            if (c == ':') {
                srv_buf_put(out, ": ", 2);
                r->st = PJ_VALUE;
            } else {
                r->bad = true;
            }
            continue;
        case PJ_AFTER: {
            const char top = r->stack[r->depth - 1];
            if (c == ',') {
                srv_buf_put(out, ", ", 2);
                r->st = top == '{' ? PJ_KEY : PJ_VALUE;
            } else if (c == (top == '{' ? '}' : ']')) {
                srv_buf_put(out, (const char *)&p[i], 1);
                r->depth--;
                pj_after_value(r);
            } else {
                r->bad = true;
            }
            continue;
        }
        default:
            r->bad = true;
        }
    }
    if (final && !r->done && !r->bad && r->depth == 0 && (r->st == PJ_NUM || r->st == PJ_LIT))
        srv_pyjson_feed(r, " ", 1, false, out);   /* a value at the top that only the end of the text ends */
    return i;
}

char *srv_pyjson_of_text(const char *s, size_t n)
{
    struct srv_pyjson_rd r = {0};
    struct srv_buf b = {0};
    size_t used = srv_pyjson_feed(&r, s, n, true, &b);
    while (used < n && (s[used] == ' ' || s[used] == '\n' || s[used] == '\r' || s[used] == '\t'))
        used++;
    srv_buf_put(&b, "", 1);
    if (!r.done || r.bad || used != n || b.oom) {
        okv_free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- the request ---- */

bool srv_errf(char *err, size_t errlen, const char **param, const char *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    *param = p;
    return false;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SRV_TOOL_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    }
    return true;
}

void srv_tools_free(struct srv_tools *t)
{
    for (int i = 0; i < t->n; i++)
        okv_free(t->defs[i]);
    okv_free(t->params);
    memset(t, 0, sizeof *t);
}

/* tool i's definition as json.dumps writes it: from its text vs[i] when there is one, else from the tree */
static char *tool_def(const cJSON *tool, const char *const *vs, const size_t *vn, int i, int indent)
{
    if (!vs)
        return srv_pyjson_text(tool, indent);
    char *txt = srv_pyjson_of_text(vs[i], vn[i]);
    if (txt && indent) {
        char *ind = srv_pyjson_indent_text(txt, indent);
        okv_free(txt);
        txt = ind;
    }
    return txt;
}

/* A function's definition (fn: {"name", "description", "parameters"}); where: how the messages name it
 * ("tools[3].function", "functions[3]"), pname: the request's field. */
static bool fn_def_ok(const cJSON *fn, const char *where, const char *pname, char *err, size_t errlen,
                      const char **param)
{
    const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
    if (!cJSON_IsString(name) || !name_ok(name->valuestring))
        return srv_errf(err, errlen, param, pname, "%s.name must be 1 to %d of a-z, A-Z, 0-9, '_', '-' and '.'", where,
                        SRV_TOOL_NAME_MAX);
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
    if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc))
        return srv_errf(err, errlen, param, pname, "%s.description must be a string", where);
    const cJSON *pars = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    if (pars && !cJSON_IsNull(pars) && !cJSON_IsObject(pars))
        return srv_errf(err, errlen, param, pname, "%s.parameters must be a JSON schema object", where);
    return true;
}

/* tools (the request's "tools", or made from its "functions"), tc, par: their values; body[0..len): JSON text whose
 * member "tools" is their text (NULL: none) */
static bool tools_parse(const okv_tokenizer *tok, const cJSON *tools, const cJSON *tc, const cJSON *par,
                        const char *body, size_t len, struct srv_tools *t, char *err, size_t errlen, const char **param)
{
    if (tools && cJSON_IsNull(tools))
        tools = NULL;
    if (tc && cJSON_IsNull(tc))
        tc = NULL;
    if (par && !cJSON_IsNull(par) && !cJSON_IsBool(par))
        return srv_errf(err, errlen, param, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    if (tools && !cJSON_IsArray(tools))
        return srv_errf(err, errlen, param, "tools", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
    const int n = tools ? cJSON_GetArraySize(tools) : 0;
    if (n > SRV_MAX_TOOLS)
        return srv_errf(err, errlen, param, "tools", "at most %d tools", SRV_MAX_TOOLS);
    const cJSON *fn_of[SRV_MAX_TOOLS];
    int i = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools) {
        const cJSON *type = cJSON_IsObject(tool) ? cJSON_GetObjectItemCaseSensitive(tool, "type") : NULL;
        const cJSON *fn = cJSON_IsObject(tool) ? cJSON_GetObjectItemCaseSensitive(tool, "function") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsObject(fn))
            return srv_errf(err, errlen, param, "tools",
                         "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": ..., ...}}", i);
        char where[48];
        snprintf(where, sizeof where, "tools[%d].function", i);
        if (!fn_def_ok(fn, where, "tools", err, errlen, param))
            return false;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        for (int k = 0; k < i; k++)
            if (!strcmp(cJSON_GetObjectItemCaseSensitive(fn_of[k], "name")->valuestring, name->valuestring))
                return srv_errf(err, errlen, param, "tools", "tools[%d]: the function '%s' is defined twice", i,
                             name->valuestring);
        fn_of[i++] = fn;
    }
    /* tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name": ...}} */
    int forced = -1;
    t->choice = n > 0 ? SRV_TOOLS_AUTO : SRV_TOOLS_OFF;
    if (tc) {
        if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
            t->choice = SRV_TOOLS_OFF;
        } else if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "auto")) {
            if (n == 0)
                return srv_errf(err, errlen, param, "tool_choice", "tool_choice 'auto' needs 'tools'");
        } else if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required")) {
            if (n == 0)
                return srv_errf(err, errlen, param, "tool_choice", "tool_choice 'required' needs 'tools'");
            if (n == 1)
                forced = 0;
            else
                t->choice = SRV_TOOLS_REQUIRED;
        } else if (cJSON_IsObject(tc)) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
            const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsString(name))
                return srv_errf(err, errlen, param, "tool_choice",
                             "tool_choice must be \"none\", \"auto\", \"required\" or "
                             "{\"type\": \"function\", \"function\": {\"name\": ...}}");
            for (int k = 0; k < n && forced < 0; k++)
                if (!strcmp(cJSON_GetObjectItemCaseSensitive(fn_of[k], "name")->valuestring, name->valuestring))
                    forced = k;
            if (forced < 0)
                return srv_errf(err, errlen, param, "tool_choice", "tool_choice names the function '%.64s', which is not "
                             "among 'tools'", name->valuestring);
        } else {
            return srv_errf(err, errlen, param, "tool_choice",
                         "tool_choice must be \"none\", \"auto\", \"required\" or "
                         "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
    }
    const bool can_list = okv_tokenizer_chat_tools(tok) != OKV_CHAT_TOOLS_NONE;
    if (t->choice == SRV_TOOLS_AUTO && forced < 0 && !can_list)
        return srv_errf(err, errlen, param, "tools",
                     "this model's chat template does not offer tools (it has no tool-call format this server "
                     "reads: Hermes/Qwen <tool_call>), so tool_choice 'auto' cannot work; force a call with "
                     "tool_choice {\"type\": \"function\", \"function\": {\"name\": ...}}, or send no tools");
    if (forced >= 0) {
        t->choice = SRV_TOOLS_FORCED;
        snprintf(t->name, sizeof t->name, "%s", cJSON_GetObjectItemCaseSensitive(fn_of[forced], "name")->valuestring);
        const cJSON *pars = cJSON_GetObjectItemCaseSensitive(fn_of[forced], "parameters");
        if (pars && cJSON_IsObject(pars)) {
            t->params = cJSON_PrintUnformatted(pars);
            if (t->params) {   /* cJSON's allocation into ours */
                char *c = okv_malloc(strlen(t->params) + 1, OKV_TAG_SERVER);
                if (c)
                    strcpy(c, t->params);
                cJSON_free(t->params);
                t->params = c;
            }
        } else {   /* no parameters: the arguments are an empty object */
            t->params = okv_malloc(64, OKV_TAG_SERVER);
            if (t->params)
                snprintf(t->params, 64, "{\"type\": \"object\", \"properties\": {}}");
        }
        if (!t->params)
            return srv_errf(err, errlen, param, NULL, "out of memory");
    } else if (t->choice == SRV_TOOLS_REQUIRED) {   /* an array of calls, each one of the functions */
        cJSON *sch = cJSON_CreateObject(), *alts = cJSON_CreateArray();
        cJSON_AddStringToObject(sch, "type", "array");
        cJSON_AddNumberToObject(sch, "minItems", 1);
        if (par && cJSON_IsFalse(par))
            cJSON_AddNumberToObject(sch, "maxItems", 1);
        cJSON_AddItemToObject(cJSON_AddObjectToObject(sch, "items"), "anyOf", alts);
        for (int k = 0; k < n; k++) {
            const cJSON *pars = cJSON_GetObjectItemCaseSensitive(fn_of[k], "parameters");
            if (pars && (cJSON_GetObjectItemCaseSensitive(pars, "$defs") ||
                         cJSON_GetObjectItemCaseSensitive(pars, "definitions"))) {
                cJSON_Delete(sch);
                return srv_errf(err, errlen, param, "tool_choice", "tool_choice 'required' with several tools: the "
                             "parameters of '%s' have $defs, which this server cannot put under one schema; name the "
                             "function in tool_choice", cJSON_GetObjectItemCaseSensitive(fn_of[k], "name")->valuestring);
            }
            cJSON *a = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
            cJSON_AddStringToObject(a, "type", "object");
            cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "name"), "const",
                                    cJSON_GetObjectItemCaseSensitive(fn_of[k], "name")->valuestring);
            if (pars && cJSON_IsObject(pars)) {
                cJSON_AddItemToObject(props, "parameters", cJSON_Duplicate(pars, 1));
            } else {
                cJSON *e = cJSON_AddObjectToObject(props, "parameters");
                cJSON_AddStringToObject(e, "type", "object");
                cJSON_AddObjectToObject(e, "properties");
            }
            cJSON_AddItemToObject(a, "properties", props);
            cJSON_AddItemToArray(req, cJSON_CreateString("name"));
            cJSON_AddItemToArray(req, cJSON_CreateString("parameters"));
            cJSON_AddItemToObject(a, "required", req);
            cJSON_AddItemToArray(alts, a);
        }
        char *txt = cJSON_PrintUnformatted(sch);
        cJSON_Delete(sch);
        if (txt) {
            t->params = okv_malloc(strlen(txt) + 1, OKV_TAG_SERVER);
            if (t->params)
                strcpy(t->params, txt);
            cJSON_free(txt);
        }
        if (!t->params)
            return srv_errf(err, errlen, param, NULL, "out of memory");
    }
    /* the definitions the prompt lists: all of them, unless "none" or the template cannot list them */
    if (t->choice != SRV_TOOLS_OFF && can_list) {
        const char *ts, *vs[SRV_MAX_TOOLS];   /* the tools' text, where the request's is given */
        size_t tn, vn[SRV_MAX_TOOLS];
        const bool by_text = body && srv_json_member(body, len, "tools", &ts, &tn) &&
                             srv_json_items(ts, tn, vs, vn, SRV_MAX_TOOLS) == cJSON_GetArraySize(tools);
        const int indent = okv_tokenizer_chat_tools(tok) == OKV_CHAT_TOOLS_LLAMA31 ? 4 : 0;
        i = 0;
        cJSON_ArrayForEach(tool, tools) {
            if (!(t->defs[i] = tool_def(tool, by_text ? vs : NULL, vn, i, indent))) {
                t->n = i;
                srv_tools_free(t);
                return srv_errf(err, errlen, param, NULL, "out of memory");
            }
            t->n = ++i;
        }
    }
    return true;
}

/* the OpenAI API's legacy "functions" / "function_call" (deprecated there in favour of tools): each function as
 * the tool {"type": "function", "function": F}, "function_call" as the tool_choice it stands for */
static void buf_puts(struct srv_buf *b, const char *s) { srv_buf_put(b, s, strlen(s)); }

static bool legacy_parse(const okv_tokenizer *tok, const cJSON *root, const cJSON *fns, const char *body, size_t len,
                         struct srv_tools *t, char *err, size_t errlen, const char **param)
{
    static const char *const mixed[] = {"tools", "tool_choice", "parallel_tool_calls"};
    for (size_t k = 0; k < sizeof mixed / sizeof mixed[0]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, mixed[k]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0))
            return srv_errf(err, errlen, param, "functions", "'functions' (the legacy form of tools) and '%s': give "
                            "'tools' and 'tool_choice', or 'functions' and 'function_call'", mixed[k]);
    }
    if (!cJSON_IsArray(fns))
        return srv_errf(err, errlen, param, "functions", "'functions' must be an array of {\"name\": ..., "
                        "\"description\": ..., \"parameters\": {...}}");
    const int n = cJSON_GetArraySize(fns);
    if (n > SRV_MAX_TOOLS)
        return srv_errf(err, errlen, param, "functions", "at most %d functions", SRV_MAX_TOOLS);
    int i = 0;
    const cJSON *fn;
    cJSON_ArrayForEach(fn, fns) {   /* checked here so that the messages name the functions */
        char where[32];
        snprintf(where, sizeof where, "functions[%d]", i++);
        if (!fn_def_ok(fn, where, "functions", err, errlen, param))
            return false;
    }
    const cJSON *fc = cJSON_GetObjectItemCaseSensitive(root, "function_call");
    if (fc && cJSON_IsNull(fc))
        fc = NULL;
    const cJSON *fc_name = cJSON_IsObject(fc) ? cJSON_GetObjectItemCaseSensitive(fc, "name") : NULL;
    if (fc && !(cJSON_IsString(fc) && (!strcmp(fc->valuestring, "none") || !strcmp(fc->valuestring, "auto"))) &&
        !(cJSON_IsString(fc_name) && cJSON_GetArraySize(fc) == 1))
        return srv_errf(err, errlen, param, "function_call", "function_call must be \"none\", \"auto\" or "
                        "{\"name\": ...}");
    /* the tools and the choice they stand for, as a tree and as text */
    cJSON *tools = cJSON_CreateArray(), *tc = NULL;
    struct srv_buf txt = {0};
    const char *fs, *vs[SRV_MAX_TOOLS];
    size_t fnn, vn[SRV_MAX_TOOLS];
    const bool by_text = body && srv_json_member(body, len, "functions", &fs, &fnn) &&
                         srv_json_items(fs, fnn, vs, vn, SRV_MAX_TOOLS) == n;
    buf_puts(&txt, "{\"tools\": [");
    i = 0;
    cJSON_ArrayForEach(fn, fns) {
        cJSON *tool = cJSON_CreateObject();
        cJSON_AddStringToObject(tool, "type", "function");
        cJSON_AddItemToObject(tool, "function", cJSON_Duplicate(fn, 1));
        cJSON_AddItemToArray(tools, tool);
        if (by_text) {
            buf_puts(&txt, i ? ", {\"type\": \"function\", \"function\": " : "{\"type\": \"function\", \"function\": ");
            srv_buf_put(&txt, vs[i], vn[i]);
            buf_puts(&txt, "}");
        }
        i++;
    }
    buf_puts(&txt, "]}");
    if (cJSON_IsString(fc)) {
        tc = cJSON_CreateString(fc->valuestring);
    } else if (fc) {
        tc = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "type", "function");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(tc, "function"), "name", fc_name->valuestring);
    }
    bool ok;
    if (!tools || (fc && !tc) || cJSON_GetArraySize(tools) != n || txt.oom) {
        ok = srv_errf(err, errlen, param, NULL, "out of memory");
    } else {
        ok = tools_parse(tok, tools, tc, NULL, by_text ? txt.s : NULL, by_text ? txt.len : 0, t, err, errlen, param);
        if (!ok && *param && !strcmp(*param, "tools"))   /* the schema's own errors */
            *param = "functions";
        else if (!ok && *param && !strcmp(*param, "tool_choice"))
            *param = "function_call";
        if (!ok && fc_name && strstr(err, "not among"))
            snprintf(err, errlen, "function_call names the function '%.64s', which is not among 'functions'",
                     fc_name->valuestring);
    }
    t->legacy = ok;
    cJSON_Delete(tools);
    cJSON_Delete(tc);
    okv_free(txt.s);
    return ok;
}

bool srv_tools_parse(const okv_tokenizer *tok, const cJSON *root, const char *body, size_t len, struct srv_tools *t,
                     char *err, size_t errlen, const char **param)
{
    memset(t, 0, sizeof *t);
    const cJSON *fns = cJSON_GetObjectItemCaseSensitive(root, "functions");
    const cJSON *fc = cJSON_GetObjectItemCaseSensitive(root, "function_call");
    if (fns && (cJSON_IsNull(fns) || (cJSON_IsArray(fns) && cJSON_GetArraySize(fns) == 0)))
        fns = NULL;
    if (fns)
        return legacy_parse(tok, root, fns, body, len, t, err, errlen, param);
    if (fc && !cJSON_IsNull(fc) && !(cJSON_IsString(fc) && !strcmp(fc->valuestring, "none")))
        return srv_errf(err, errlen, param, "function_call", "'function_call' needs 'functions'");
    return tools_parse(tok, cJSON_GetObjectItemCaseSensitive(root, "tools"),
                       cJSON_GetObjectItemCaseSensitive(root, "tool_choice"),
                       cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls"), body, len, t, err, errlen, param);
}

/* ---- reading the reply ---- */

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
        i++;
    return i;
}

/* the end of the JSON string token starting at s[i] ('"'), or 0 when it does not end in s[0..n) */
static size_t string_end(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return 0;
}

/* the value text of the top-level member `key` of the JSON object s[0..n) (which cJSON read) */
static bool member_span(const char *s, size_t n, const char *key, const char **vs, size_t *vn)
{
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{')
        return false;
    for (i++;;) {
        i = skip_ws(s, n, i);
        if (i >= n || s[i] != '"')
            return false;
        const size_t k0 = i;
        if (!(i = string_end(s, n, i)))
            return false;
        cJSON *k = cJSON_ParseWithLength(s + k0, i - k0);
        const bool match = cJSON_IsString(k) && !strcmp(k->valuestring, key);
        cJSON_Delete(k);
        i = skip_ws(s, n, i);
        if (i >= n || s[i] != ':')
            return false;
        i = skip_ws(s, n, i + 1);
        struct srv_pyjson_rd r = {0};
        struct srv_buf sink = {0};
        const size_t used = srv_pyjson_feed(&r, s + i, n - i, true, &sink);
        okv_free(sink.s);
        if (!r.done || r.bad)
            return false;
        if (match) {
            *vs = s + i;
            *vn = used;
            return true;
        }
        i = skip_ws(s, n, i + used);
        if (i >= n || s[i] != ',')
            return false;
        i++;
    }
}

bool srv_json_member(const char *s, size_t n, const char *key, const char **vs, size_t *vn)
{
    return member_span(s, n, key, vs, vn);
}

int srv_json_items(const char *s, size_t n, const char **vs, size_t *vn, int max)
{
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '[')
        return -1;
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == ']')
        return 0;
    for (int k = 0;; k++) {
        struct srv_pyjson_rd r = {0};
        struct srv_buf sink = {0};
        const size_t used = srv_pyjson_feed(&r, s + i, n - i, true, &sink);
        okv_free(sink.s);
        if (!r.done || r.bad || k == max)
            return -1;
        vs[k] = s + i;
        vn[k] = used;
        i = skip_ws(s, n, i + used);
        if (i < n && s[i] == ']')
            return k + 1;
        if (i >= n || s[i] != ',')
            return -1;
        i = skip_ws(s, n, i + 1);
    }
}

char *srv_pyjson_indent_text(const char *c, int indent)
{
    struct srv_buf b = {0};
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; c[i]; i++) {
        const char ch = c[i];
        if (in_str) {
            srv_buf_put(&b, &c[i], 1);
            if (ch == '\\' && c[i + 1])
                srv_buf_put(&b, &c[++i], 1);
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
            srv_buf_put(&b, &ch, 1);
        } else if ((ch == '{' || ch == '[') && c[i + 1] == (ch == '{' ? '}' : ']')) {   /* {} and [] as they are */
            srv_buf_put(&b, &c[i], 2);
            i++;
        } else if (ch == '{' || ch == '[') {
            srv_buf_put(&b, &ch, 1);
            depth++;
            srv_buf_printf(&b, "\n%*s", depth * indent, "");
        } else if (ch == '}' || ch == ']') {
            depth--;
            srv_buf_printf(&b, "\n%*s", depth * indent, "");
            srv_buf_put(&b, &ch, 1);
        } else if (ch == ',' && c[i + 1] == ' ') {   /* ", " between items: "," and a new line */
            srv_buf_printf(&b, ",\n%*s", depth * indent, "");
            i++;
        } else {
            srv_buf_put(&b, &ch, 1);
        }
    }
    srv_buf_put(&b, "", 1);
    if (b.oom) {
        okv_free(b.s);
        return NULL;
    }
    return b.s;
}

/* One call's text (between the tags): {"name": string, "arguments": object} -> *c; 0 when it is not one,
 * -1 when out of memory, 1 when read */
static int read_call(const char *s, size_t n, struct srv_tool_call *c)
{
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(s, n, &end, false);
    while (o && end && end < s + n && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
        end++;
    if (o && end != s + n) {   /* something after the object */
        cJSON_Delete(o);
        o = NULL;
    }
    const cJSON *name = o ? cJSON_GetObjectItemCaseSensitive(o, "name") : NULL;
    const cJSON *args = o ? cJSON_GetObjectItemCaseSensitive(o, "arguments") : NULL;
    if (!args && o)   /* some models write "parameters" */
        args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !cJSON_IsObject(args)) {
        cJSON_Delete(o);
        return 0;
    }
    c->name = srv_strndup(name->valuestring, strlen(name->valuestring));
    const char *vs;   /* the arguments from their text (json.dumps of what json.loads reads: 1.0 stays 1.0) */
    size_t vn;
    if (member_span(s, n, args->string, &vs, &vn))
        c->arguments = srv_pyjson_of_text(vs, vn);
    if (!c->arguments)
        c->arguments = srv_pyjson_text(args, 0);
    cJSON_Delete(o);
    if (!c->name || !c->arguments) {
        okv_free(c->name);
        okv_free(c->arguments);
        c->name = c->arguments = NULL;
        return -1;
    }
    return 1;
}

void srv_tool_reply_free(struct srv_tool_reply *r)
{
    for (int i = 0; i < r->n; i++) {
        okv_free(r->calls[i].name);
        okv_free(r->calls[i].arguments);
    }
    okv_free(r->calls);
    okv_free(r->content);
    memset(r, 0, sizeof *r);
}

/* Llama 3.1: the text (past leading whitespace) is one or more call objects separated by ';' -> calls; 0 when
 * it is not, -1 when out of memory */
static int read_json_calls(const char *text, size_t len, struct srv_tool_reply *out)
{
    const char *p = text, *end = text + len;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
        p++;
    if (p == end || *p != '{')
        return 0;
    while (p < end) {
        const char *stop = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &stop, false);
        if (!o || !stop)
            return 0;
        cJSON_Delete(o);
        struct srv_tool_call *v = okv_realloc(out->calls, sizeof *v * (size_t)(out->n + 1), OKV_TAG_SERVER);
        if (!v)
            return -1;
        out->calls = v;
        memset(&v[out->n], 0, sizeof *v);
        const int r = read_call(p, (size_t)(stop - p), &v[out->n]);
        if (r <= 0)
            return r;
        out->n++;
        p = stop;
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ';'))
            p++;
    }
    return 1;
}

bool srv_tools_read_reply(enum okv_chat_tools fmt, const char *text, size_t len, struct srv_tool_reply *out)
{
    memset(out, 0, sizeof *out);
    if (fmt == OKV_CHAT_TOOLS_LLAMA31) {
        const int r = read_json_calls(text, len, out);
        if (r < 0) {
            srv_tool_reply_free(out);
            return false;
        }
        if (r == 0) {
            srv_tool_reply_free(out);
            return (out->content = srv_strndup(text, len)) != NULL;
        }
        return true;
    }
    const char *first = srv_find(text, len, CALL_OPEN);
    const char *end = text + len;
    bool ok = first != NULL;
    for (const char *p = first; ok && p;) {
        const char *body = p + strlen(CALL_OPEN);
        const char *close = srv_find(body, (size_t)(end - body), CALL_CLOSE);
        const char *stop = close ? close : end;   /* a call the reply ended in (cut off or no closing tag) */
        struct srv_tool_call *v = okv_realloc(out->calls, sizeof *v * (size_t)(out->n + 1), OKV_TAG_SERVER);
        if (!v)
            goto oom;
        out->calls = v;
        memset(&v[out->n], 0, sizeof *v);
        const int r = read_call(body, (size_t)(stop - body), &v[out->n]);
        if (r < 0)
            goto oom;
        if (r == 0) {
            ok = false;
            break;
        }
        out->n++;
        p = close ? srv_find(close, (size_t)(end - close), CALL_OPEN) : NULL;
    }
    if (!ok) {   /* no calls: the whole text is the content */
        srv_tool_reply_free(out);
        if (!(out->content = srv_strndup(text, len)))
            return false;
        return true;
    }
    if (first > text && !(out->content = srv_strndup(text, (size_t)(first - text))))
        goto oom;
    return true;
oom:
    srv_tool_reply_free(out);
    return false;
}

bool srv_tools_read_required(const char *text, size_t len, struct srv_tool_reply *out)
{
    memset(out, 0, sizeof *out);
    cJSON *arr = cJSON_ParseWithLength(text, len);
    bool ok = cJSON_IsArray(arr) && cJSON_GetArraySize(arr) > 0;
    const cJSON *it, *items = ok ? arr : NULL;
    cJSON_ArrayForEach(it, items) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *pars = cJSON_GetObjectItemCaseSensitive(it, "parameters");
        struct srv_tool_call *v = cJSON_IsString(name) && cJSON_IsObject(pars)
                                      ? okv_realloc(out->calls, sizeof *v * (size_t)(out->n + 1), OKV_TAG_SERVER)
                                      : NULL;
        if (!v) {
            ok = false;
            break;
        }
        out->calls = v;
        v[out->n].name = srv_strndup(name->valuestring, strlen(name->valuestring));
        v[out->n].arguments = srv_pyjson_text(pars, 0);
        out->n++;
        if (!v[out->n - 1].name || !v[out->n - 1].arguments) {
            ok = false;
            break;
        }
    }
    cJSON_Delete(arr);
    if (!ok)
        srv_tool_reply_free(out);
    return ok;
}

void srv_tool_stream_free(struct srv_tool_stream *s)
{
    okv_free(s->held.s);
    memset(s, 0, sizeof *s);
}

void srv_tool_deltas_free(struct srv_tool_delta *d, int n)
{
    for (int i = 0; i < n; i++) {
        okv_free(d[i].name);
        okv_free(d[i].arguments);
    }
    okv_free(d);
}

/* Add a piece of call `index` (name: its first, taken; args[0..an)); joined to the last delta when that is of the
 * same call. False when out of memory. */
static bool add_delta(struct srv_tool_delta **d, int *nd, int index, char *name, const char *args, size_t an)
{
    if (*nd > 0 && (*d)[*nd - 1].index == index && !name) {
        struct srv_tool_delta *last = &(*d)[*nd - 1];
        const size_t have = strlen(last->arguments);
        char *a = okv_realloc(last->arguments, have + an + 1, OKV_TAG_SERVER);
        if (!a)
            return false;
        memcpy(a + have, args, an);
        a[have + an] = 0;
        last->arguments = a;
        return true;
    }
    struct srv_tool_delta *v = okv_realloc(*d, sizeof *v * (size_t)(*nd + 1), OKV_TAG_SERVER);
    char *a = srv_strndup(args, an);
    if (!v || !a) {
        if (v)
            *d = v;
        okv_free(a);
        okv_free(name);
        return false;
    }
    *d = v;
    v[(*nd)++] = (struct srv_tool_delta){.index = index, .name = name, .arguments = a};
    return true;
}

/* After whitespace from *i, byte c: 1 with *i past it, 0 when the text ends first, -1 when another byte stands
 * there. */
static int head_byte(const char *h, size_t n, size_t *i, char c)
{
    *i = skip_ws(h, n, *i);
    if (*i == n)
        return 0;
    if (h[*i] != c)
        return -1;
    (*i)++;
    return 1;
}

/* After whitespace from *i, one of keys[0..nk) (written with their quotes): its index with *i past it, -2 when
 * the text ends inside one, -1 when none stands there. */
static int head_key(const char *h, size_t n, size_t *i, const char *const *keys, int nk)
{
    *i = skip_ws(h, n, *i);
    for (int k = 0; k < nk; k++) {
        const size_t kl = strlen(keys[k]), have = n - *i < kl ? n - *i : kl;
        if (memcmp(h + *i, keys[k], have) != 0)
            continue;
        if (have < kl)
            return -2;
        *i += kl;
        return k;
    }
    return -1;
}

/* The head of a Hermes call being written, {"name": "...", "arguments": {  (or "parameters"), in h[0..n): 1 with
 * *name (owned) and *args_at (where the arguments' object starts), 0 when more text is needed, -1 when the call is
 * not written so (it is read whole at its close), -2 when out of memory. */
static int call_head(const char *h, size_t n, char **name, size_t *args_at)
{
    static const char *const name_key[1] = {"\"name\""}, *const args_key[2] = {"\"arguments\"", "\"parameters\""};
    size_t i = 0;
    int r;
    if ((r = head_byte(h, n, &i, '{')) <= 0 || (r = head_key(h, n, &i, name_key, 1)) < 0 ||
        (r = head_byte(h, n, &i, ':')) <= 0)
        return r == -2 ? 0 : r;
    i = skip_ws(h, n, i);
    if (i == n)
        return 0;
    if (h[i] != '"')
        return -1;
    const size_t v0 = i;
    if (!(i = string_end(h, n, i)))
        return 0;
    const size_t v1 = i;
    if ((r = head_byte(h, n, &i, ',')) <= 0 || (r = head_key(h, n, &i, args_key, 2)) < 0 ||
        (r = head_byte(h, n, &i, ':')) <= 0 || (r = head_byte(h, n, &i, '{')) <= 0)
        return r == -2 ? 0 : r;
    cJSON *nm = cJSON_ParseWithLength(h + v0, v1 - v0);
    if (!cJSON_IsString(nm)) {
        cJSON_Delete(nm);
        return -1;
    }
    *name = srv_strndup(nm->valuestring, strlen(nm->valuestring));
    cJSON_Delete(nm);
    if (!*name)
        return -2;
    *args_at = i - 1;   /* the '{' */
    return 1;
}

/* a live call's arguments read on from args_at to upto, their json.dumps text that this gives sent as a piece */
static bool live_args(struct srv_tool_stream *s, size_t upto, bool final, struct srv_tool_delta **d, int *nd)
{
    struct srv_buf out = {0};
    s->args_at += srv_pyjson_feed(&s->args_rd, s->held.s + s->args_at, upto - s->args_at, final, &out);
    bool ok = !out.oom;
    if (ok && out.len > 0) {
        ok = add_delta(d, nd, s->n_calls - 1, NULL, out.s, out.len);
        s->args_sent += out.len;
    }
    okv_free(out.s);
    return ok;
}

bool srv_tool_stream_feed(struct srv_tool_stream *s, const char *p, size_t n, bool final, struct srv_buf *content,
                          struct srv_tool_delta **deltas, int *n_deltas)
{
    if (s->fmt == OKV_CHAT_TOOLS_LLAMA31) {   /* a reply that opens with '{' is read whole at its end */
        if (s->lead == 1) {
            srv_buf_put(content, p, n);
            return !content->oom;
        }
        srv_buf_put(&s->held, p, n);
        if (s->held.oom)
            return false;
        size_t i = 0;
        while (i < s->held.len && strchr(" \n\t\r", s->held.s[i]))
            i++;
        if (s->lead == 0 && i < s->held.len)
            s->lead = s->held.s[i] == '{' ? 2 : 1;
        if (s->lead == 1 || (final && s->lead == 0)) {
            srv_buf_put(content, s->held.s, s->held.len);
            s->held.len = 0;
            return !content->oom;
        }
        if (!final)
            return true;
        struct srv_tool_reply r;
        if (!srv_tools_read_reply(s->fmt, s->held.s, s->held.len, &r))
            return false;
        if (r.n == 0)
            srv_buf_put(content, s->held.s, s->held.len);
        bool ok = true;
        for (int k = 0; k < r.n && ok; k++) {
            ok = add_delta(deltas, n_deltas, s->n_calls++, r.calls[k].name, r.calls[k].arguments,
                           strlen(r.calls[k].arguments));
            r.calls[k].name = NULL;
        }
        srv_tool_reply_free(&r);
        s->held.len = 0;
        return ok && !content->oom;
    }
    srv_buf_put(&s->held, p, n);
    if (s->held.oom)
        return false;
    for (;;) {
        char *h = s->held.s;
        size_t hn = s->held.len;
        if (s->bad) {   /* everything as content */
            srv_buf_put(content, h, hn);
            s->held.len = 0;
            return !content->oom;
        }
        if (!s->in_call) {
            const char *open = srv_find(h, hn, CALL_OPEN);
            if (open) {
                if (s->n_calls == 0)   /* content: the text before the first call only */
                    srv_buf_put(content, h, (size_t)(open - h));
                const size_t used = (size_t)(open - h) + strlen(CALL_OPEN);
                memmove(h, h + used, hn - used);
                s->held.len = hn - used;
                s->in_call = true;
                s->live = 0;
                s->args_sent = 0;
                memset(&s->args_rd, 0, sizeof s->args_rd);
                continue;
            }
            const size_t keep = final ? 0 : srv_partial_tag(h, hn, CALL_OPEN);
            if (s->n_calls == 0)
                srv_buf_put(content, h, hn - keep);
            memmove(h, h + hn - keep, keep);
            s->held.len = keep;
            return !content->oom;
        }
        const char *close = srv_find(h, hn, CALL_CLOSE);
        /* the call's text so far: up to its close, or (still written) short of a possible closing tag */
        const size_t upto = close ? (size_t)(close - h) : final ? hn : hn - srv_partial_tag(h, hn, CALL_CLOSE);
        if (s->live == 0) {
            char *name = NULL;
            const int r = call_head(h, upto, &name, &s->args_at);
            if (r == -2)
                return false;
            if (r == 1) {
                if (!add_delta(deltas, n_deltas, s->n_calls++, name, "", 0))
                    return false;
                s->live = 1;
            } else if (r < 0 || close || final) {
                s->live = -1;
            }
        }
        if (s->live == 1 && !live_args(s, upto, close || final, deltas, n_deltas))
            return false;
        if (!close && !final)
            return true;   /* the call is still being written */
        const size_t body = upto;
        struct srv_tool_call c = {0};
        const int r = read_call(h, body, &c);
        if (r < 0)
            return false;
        if (s->live == 1) {   /* the rest of its arguments (the whole read's text: the same, as far as sent) */
            const size_t al = r == 1 ? strlen(c.arguments) : 0;
            bool ok = true;
            if (al > s->args_sent)
                ok = add_delta(deltas, n_deltas, s->n_calls - 1, NULL, c.arguments + s->args_sent, al - s->args_sent);
            okv_free(c.name);
            okv_free(c.arguments);
            if (!ok)
                return false;
        } else if (r == 0) {   /* not a call: it goes out as the text it was */
            s->bad = true;
            srv_buf_put(content, CALL_OPEN, strlen(CALL_OPEN));
            continue;
        } else if (!add_delta(deltas, n_deltas, s->n_calls++, c.name, c.arguments, strlen(c.arguments))) {
            okv_free(c.arguments);
            return false;
        } else {
            okv_free(c.arguments);
        }
        s->in_call = false;
        s->live = 0;
        const size_t used = close ? body + strlen(CALL_CLOSE) : hn;
        memmove(h, h + used, hn - used);
        s->held.len = hn - used;
        if (!close)
            return true;
    }
}

void srv_random_id(char out[48], const char *prefix)
{
    static atomic_uint_fast64_t counter;
    struct okv_rng r;
    okv_rng_seed(&r, (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(okv_now() * 1e9) ^
                         (atomic_fetch_add(&counter, 1) << 32));
    const uint64_t a = okv_rng_next(&r), b = okv_rng_next(&r);
    snprintf(out, 48, "%s%016llx%016llx", prefix, (unsigned long long)a, (unsigned long long)b);
}

void srv_tool_call_id(char out[48])
{
    srv_random_id(out, "chatcmpl-tool-");
}
