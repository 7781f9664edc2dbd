#include "cli.h"

#include "oasiskv/backend.h"
#include "oasiskv/tp.h"
#include "oasiskv/gguf.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("oasiskv: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

const char *cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        cli_die("%s needs a value", argv[*i]);
    return argv[++*i];
}

int cli_int(const char *flag, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        cli_die("%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi)
        cli_die("%s: %ld is out of range [%ld, %ld]", flag, v, lo, hi);
    return (int)v;
}

bool cli_host_fp8(const char *flag, const char *s)
{
    if (!strcmp(s, "auto"))
        return false;
    if (!strcmp(s, "fp8") || !strcmp(s, "fp8_e4m3"))
        return true;
    cli_die("%s: '%s' is not a host KV type (auto or fp8)", flag, s);
    return false;
}

enum okv_predict cli_predict(const char *s, bool *from_prompt, bool *after_attn)
{
    static const struct {
        const char *name;
        enum okv_predict mode;
        bool from_prompt, after_attn;
    } modes[] = {{"current", OKV_PREDICT_CURRENT, false, false},
                 {"lookahead", OKV_PREDICT_LOOKAHEAD, false, false},
                 {"oracle", OKV_PREDICT_ORACLE, false, false},
                 {"layer-ahead", OKV_PREDICT_LAYER_AHEAD, false, false},
                 {"layer-ahead-attn", OKV_PREDICT_LAYER_AHEAD, false, true},
                 {"current-from-prompt", OKV_PREDICT_CURRENT, true, false},
                 {"lookahead-from-prompt", OKV_PREDICT_LOOKAHEAD, true, false}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(s, modes[i].name) && (from_prompt || !modes[i].from_prompt)) {
            if (from_prompt)
                *from_prompt = modes[i].from_prompt;
            if (after_attn)
                *after_attn = modes[i].after_attn;
            return modes[i].mode;
        }
    cli_die("--predict: '%s' is not one of current, lookahead, oracle, layer-ahead, layer-ahead-attn%s", s,
            from_prompt ? ", current-from-prompt, lookahead-from-prompt" : "");
}

enum okv_merge cli_merge(const char *flag, const char *s)
{
    static const enum okv_merge rules[] = {OKV_MERGE_AUTO, OKV_MERGE_SHARE, OKV_MERGE_RANK};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (!strcmp(s, okv_merge_name(rules[i])))
            return rules[i];
    cli_die("%s: '%s' is not a merge rule (auto, share or rank)", flag, s);
    return OKV_MERGE_AUTO;
}

double cli_double(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        cli_die("%s: '%s' is not a number", flag, s);
    if (v < lo || v > hi)
        cli_die("%s: %g is out of range [%g, %g]", flag, v, lo, hi);
    return v;
}

uint64_t cli_u64(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    if (*s == '-')
        cli_die("%s: '%s' must not be negative", flag, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        cli_die("%s: '%s' is not a non-negative integer", flag, s);
    return v;
}

int32_t *cli_token_list(const char *flag, const char *s, size_t *n)
{
    size_t cap = 16, cnt = 0;
    int32_t *ids = okv_malloc(cap * sizeof *ids, OKV_TAG_MISC);
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX)
            cli_die("%s: bad token id list '%s' (expected comma-separated non-negative integers)", flag, s);
        if (cnt == cap) {
            cap *= 2;
            ids = okv_realloc(ids, cap * sizeof *ids, OKV_TAG_MISC);
        }
        ids[cnt++] = (int32_t)v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            cli_die("%s: bad token id list '%s' (expected comma-separated non-negative integers)", flag, s);
    }
    if (cnt == 0)
        cli_die("%s: empty token id list", flag);
    *n = cnt;
    return ids;
}

char *cli_read_text(const char *flag, const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        cli_die("%s: cannot open '%s': %s", flag, path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = okv_malloc(cap, OKV_TAG_MISC);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = okv_realloc(buf, cap, OKV_TAG_MISC);
        }
        if (!buf)
            cli_die("%s: out of memory reading '%s'", flag, path);
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0)
            break;
    }
    const bool bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (bad)
        cli_die("%s: error reading '%s'", flag, path);
    buf[n] = 0;
    if (strlen(buf) != n)
        cli_die("%s: '%s' holds a NUL byte (not text)", flag, path);
    return buf;
}

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

const char *cli_default_model(void)
{
    static char buf[PATH_MAX + 64];
    const char *env = getenv("OKV_MODEL");
    if (env && *env)
        return env;
    const char *rel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (file_exists(rel))
        return rel;
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, sizeof buf, "%s/../%s", exe, rel);
            if (file_exists(buf))
                return buf;
        }
    }
    return rel;
}

void cli_load(const char *path, struct okv_model **m, okv_tokenizer **tok)
{
    *tok = NULL;
    enum okv_status st = okv_model_load(path, m);
    if (st != OKV_OK)
        cli_die("cannot load model %s: %s", path, okv_last_error());
    struct stat sb;
    if ((*m)->gguf) {
        st = okv_tokenizer_from_gguf((*m)->gguf, tok);
    } else {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/tokenizer.json", path);
        if (stat(p, &sb) != 0)
            return;   /* a folder without a tokenizer: token ids only */
        st = okv_tokenizer_from_hf_dir(path, tok);
    }
    if (st != OKV_OK) {
        okv_model_free(*m);
        cli_die("cannot load the tokenizer of %s: %s", path, okv_last_error());
    }
    /* as serve --tokenizer checks: ids the tokenizer makes must be rows of the embedding */
    if (okv_tokenizer_n_vocab(*tok) > (*m)->cfg.vocab_size) {
        int nt = okv_tokenizer_n_vocab(*tok), nv = (*m)->cfg.vocab_size;
        okv_tokenizer_free(*tok);
        okv_model_free(*m);
        cli_die("%s: the tokenizer has %d tokens, more than the model's vocabulary of %d: they do not belong together",
                path, nt, nv);
    }
}

void cli_load_format(const char *path, bool dummy, struct okv_model **m, okv_tokenizer **tok)
{
    if (!dummy) {
        cli_load(path, m, tok);
        return;
    }
    *tok = NULL;
    if (okv_model_load_dummy(path, 1, m) != OKV_OK)
        cli_die("cannot build a dummy model from %s: %s", path, okv_last_error());
}

okv_tokenizer *cli_load_tokenizer(const char *path)
{
    okv_tokenizer *tok = NULL;
    struct stat sb;
    enum okv_status st;
    if (stat(path, &sb) != 0)
        cli_die("--tokenizer %s: %s", path, strerror(errno));
    size_t n = strlen(path);
    if (S_ISDIR(sb.st_mode)) {
        st = okv_tokenizer_from_hf_dir(path, &tok);
    } else if (n > 5 && !strcmp(path + n - 5, ".gguf")) {
        okv_gguf *g = NULL;
        if ((st = okv_gguf_open(path, &g)) == OKV_OK)
            st = okv_tokenizer_from_gguf(g, &tok);
        okv_gguf_close(g);   /* the tokenizer copies what it needs */
    } else {
        st = okv_tokenizer_from_json_file(path, &tok);
    }
    if (st != OKV_OK)
        cli_die("--tokenizer %s: %s", path, okv_last_error());
    return tok;
}

void cli_chat_template(okv_tokenizer *tok, const char *arg)
{
    if (!tok)
        cli_die("--chat-template: the model has no tokenizer to take it");
    const bool inline_tpl = access(arg, R_OK) != 0 && (strstr(arg, "{{") || strstr(arg, "{%"));   /* as vLLM takes it */
    if (!inline_tpl && access(arg, R_OK) != 0)
        cli_die("--chat-template %s: %s (give a file of the Jinja template, or the template itself)", arg, strerror(errno));
    char *txt = inline_tpl ? NULL : cli_read_text("--chat-template", arg);
    const char *tpl = inline_tpl ? arg : txt;
    if (!*tpl || okv_tokenizer_set_chat_template(tok, tpl, strlen(tpl)) != OKV_OK)
        cli_die("--chat-template %s: %s", arg, *tpl ? okv_last_error() : "the file is empty");
    okv_free(txt);
    if (okv_tokenizer_chat_format(tok) == OKV_CHAT_FORMAT_NONE)
        cli_die("--chat-template %s: not a template OasisKV renders (ChatML, Llama 3, Llama 2, Mistral [INST] or DeepSeek-R1)",
                arg);
}

bool cli_load_format_arg(const char *v)
{
    if (!strcmp(v, "dummy"))
        return true;
    if (!strcmp(v, "auto"))
        return false;
    cli_die("--load-format: '%s' is not one of auto, dummy", v);
}

void cli_json_str(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

struct okv_backend *cli_backend(const char *device, int threads, int tp, const struct okv_model_config *cfg)
{
    struct okv_backend_params bp = {.n_threads = threads};
    okv_backend *be = NULL;
    enum okv_status st = tp > 1 ? okv_backend_create_tp(device, &bp, tp, cfg, &be) : okv_backend_create(device, &bp, &be);
    if (st != OKV_OK)
        cli_die("%s", okv_last_error());
    return be;
}
