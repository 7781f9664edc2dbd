/* The texts the evaluation reads: real English that Debian ships, loaded once, with
 * whitespace collapsed and cut into sentences, plus a word list drawn from them.
 *
 * HELD-OUT DATA: every file in `sources` below is used for evaluation only. A
 * training script (a later issue) must skip every path whose held_out flag is set;
 * okv_eval_text_sources() lists them. The license texts not listed here (GPL-1, GPL-2,
 * LGPL-2, LGPL-2.1, Artistic, BSD, GFDL-1.2) are free for training. Note that the
 * GPL-3 is also the default text of bench/bench_sparse.c. */
#define _DEFAULT_SOURCE   /* realpath */
#include "eval_internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct okv_eval_text_source sources[] = {
    /* "licenses": on every Debian system (base-files) */
    {"/usr/share/common-licenses/GPL-3", "licenses", true},
    {"/usr/share/common-licenses/Apache-2.0", "licenses", true},
    {"/usr/share/common-licenses/MPL-2.0", "licenses", true},
    {"/usr/share/common-licenses/GFDL-1.3", "licenses", true},
    {"/usr/share/common-licenses/MPL-1.1", "licenses", true},
    {"/usr/share/common-licenses/CC0-1.0", "licenses", true},
    /* "essay": the doc-debian package (scripts/setup.sh installs it); gzip-compressed */
    {"/usr/share/doc/debian/debian-manifesto.gz", "essay", true},
    {"/usr/share/doc/debian/social-contract.txt.gz", "essay", true},
    {"/usr/share/doc/debian/constitution.txt.gz", "essay", true},
};

const struct okv_eval_text_source *okv_eval_text_sources(int *n)
{
    *n = (int)(sizeof sources / sizeof sources[0]);
    return sources;
}

int eval_rand(struct okv_rng *r, int n) { return n <= 1 ? 0 : (int)(okv_rng_next(r) % (uint64_t)n); }

/* Read a file whole, through gzip -dc when it ends in .gz (gzip is an Essential
 * Debian package). NULL when it cannot be read. */
static char *read_text(const char *path, size_t *len)
{
    size_t pl = strlen(path);
    bool gz = pl > 3 && !strcmp(path + pl - 3, ".gz");
    FILE *f;
    if (gz) {
        FILE *probe = fopen(path, "rb");
        if (!probe)
            return NULL;
        fclose(probe);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "gzip -dc '%s' 2>/dev/null", path);
        f = popen(cmd, "r");
    } else {
        f = fopen(path, "rb");
    }
    if (!f)
        return NULL;
    struct okv_strbuf b = {0};
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        okv_sb_put(&b, buf, n);
    int rc = gz ? pclose(f) : fclose(f);
    if (rc != 0 || b.oom || !b.len) {
        okv_free(b.s);
        return NULL;
    }
    *len = b.len;
    return b.s;
}

/* Append text with every run of whitespace (and control characters) made one space;
 * non-ASCII bytes are dropped so that every tokenizer sees plain text. */
static void append_collapsed(struct okv_strbuf *b, const char *t, size_t n)
{
    bool space = b->len == 0 || b->s[b->len - 1] == ' ';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch >= 0x80)
            continue;
        if (isspace(ch) || ch < 0x20) {
            if (!space)
                okv_sb_put(b, " ", 1), space = true;
            continue;
        }
        /* rules of dashes, underscores, equals signs and stars: layout, not prose */
        if ((ch == '-' || ch == '_' || ch == '=' || ch == '*') && i + 1 < n && t[i + 1] == (char)ch) {
            while (i + 1 < n && t[i + 1] == (char)ch)
                i++;
            if (!space)
                okv_sb_put(b, " ", 1), space = true;
            continue;
        }
        char c = (char)ch;
        okv_sb_put(b, &c, 1);
        space = false;
    }
    if (!space)
        okv_sb_put(b, " ", 1);
}

/* Cut into sentences: a unit ends after '.', '!' or '?' and the space after it,
 * when the next character starts a word in upper case, a digit or a quote. */
static enum okv_status cut_units(struct eval_corpus *c)
{
    int cap = 256;
    c->off = okv_malloc(sizeof(uint32_t) * (size_t)cap, OKV_TAG_MISC);
    if (!c->off)
        return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
    c->n_units = 0;
    c->off[0] = 0;
    for (size_t i = 0; i + 2 < c->len; i++) {
        char ch = c->text[i], nx = c->text[i + 2];
        bool end = (ch == '.' || ch == '!' || ch == '?') && c->text[i + 1] == ' ' &&
                   (isupper((unsigned char)nx) || isdigit((unsigned char)nx) || nx == '"' || nx == '(');
        /* legal sentences run long: a clause ends a unit past 240 bytes, so that needles
         * can stand close to any depth */
        end |= (ch == ';' || ch == ',' || ch == ':') && c->text[i + 1] == ' ' && i + 2 - c->off[c->n_units] > 240;
        if (end) {
            if (i + 2 - c->off[c->n_units] < 2)
                continue;
            if (c->n_units + 2 >= cap) {
                cap *= 2;
                uint32_t *p = okv_realloc(c->off, sizeof(uint32_t) * (size_t)cap, OKV_TAG_MISC);
                if (!p)
                    return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
                c->off = p;
            }
            c->off[++c->n_units] = (uint32_t)(i + 2);
        }
    }
    if (c->off[c->n_units] < c->len)
        c->off[++c->n_units] = (uint32_t)c->len;
    return OKV_OK;
}

static enum okv_status load_set(const char *set, struct eval_corpus *c, int *n_files)
{
    struct okv_strbuf b = {0};
    *n_files = 0;
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        if (strcmp(sources[i].set, set))
            continue;
        size_t n;
        char *t = read_text(sources[i].path, &n);
        if (!t)
            continue;
        append_collapsed(&b, t, n);
        okv_free(t);
        (*n_files)++;
    }
    if (b.oom) {
        okv_free(b.s);
        return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
    }
    c->text = b.s;
    c->len = b.len;
    if (!*n_files)
        return OKV_OK;
    return cut_units(c);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static enum okv_status collect_words(okv_eval_ctx *c)
{
    int cap = 4096, n = 0;
    char **w = okv_malloc(sizeof(char *) * (size_t)cap, OKV_TAG_MISC);
    if (!w)
        return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
    const struct eval_corpus *cs[2] = {&c->lic, c->has_essay ? &c->essay : NULL};
    for (int k = 0; k < 2; k++) {
        if (!cs[k])
            continue;
        const char *t = cs[k]->text;
        size_t len = cs[k]->len;
        for (size_t i = 0; i < len;) {
            if (!isalpha((unsigned char)t[i])) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < len && isalpha((unsigned char)t[j]))
                j++;
            bool lower = true;
            for (size_t q = i; q < j; q++)
                lower &= islower((unsigned char)t[q]) != 0;
            /* whole words only (not part of a path or an identifier) */
            bool clean = (i == 0 || t[i - 1] == ' ') && (j == len || strchr(" .,;:", t[j]));
            if (lower && clean && j - i >= 4 && j - i <= 9) {
                if (n == cap) {
                    cap *= 2;
                    char **p = okv_realloc(w, sizeof(char *) * (size_t)cap, OKV_TAG_MISC);
                    if (!p)
                        goto oom;
                    w = p;
                }
                w[n] = okv_malloc(j - i + 1, OKV_TAG_MISC);
                if (!w[n])
                    goto oom;
                memcpy(w[n], t + i, j - i);
                w[n][j - i] = 0;
                n++;
            }
            i = j;
        }
    }
    qsort(w, (size_t)n, sizeof *w, cmp_str);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && !strcmp(w[m - 1], w[i]))
            okv_free(w[i]);
        else
            w[m++] = w[i];
    }
    c->words = w;
    c->n_words = m;
    return OKV_OK;
oom:
    for (int i = 0; i < n; i++)
        okv_free(w[i]);
    okv_free(w);
    return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
}

static void corpus_free(struct eval_corpus *c)
{
    okv_free(c->text);
    okv_free(c->off);
    memset(c, 0, sizeof *c);
}

enum okv_status okv_eval_ctx_create(const okv_tokenizer *tok, okv_eval_ctx **out)
{
    *out = NULL;
    if (!tok)
        return okv_set_error(OKV_ERR_INVALID_ARG, "eval: the model has no tokenizer");
    okv_eval_ctx *c = okv_calloc(1, sizeof *c, OKV_TAG_MISC);
    if (!c)
        return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
    c->tok = tok;
    int nf = 0;
    enum okv_status st = load_set("licenses", &c->lic, &nf);
    if (st == OKV_OK && (nf == 0 || c->lic.n_units < 50))
        st = okv_set_error(OKV_ERR_IO, "eval: no license text under /usr/share/common-licenses (base-files)");
    if (st == OKV_OK)
        st = load_set("essay", &c->essay, &nf);
    if (st == OKV_OK) {
        c->has_essay = nf > 0 && c->essay.n_units >= 50;
        if (!c->has_essay) {
            OKV_LOG_WARN("eval: doc-debian texts not found under /usr/share/doc/debian; essay haystacks use the licenses");
            corpus_free(&c->essay);
        }
    }
    if (st == OKV_OK)
        st = collect_words(c);
    if (st != OKV_OK) {
        okv_eval_ctx_free(c);
        return st;
    }
    *out = c;
    return OKV_OK;
}

/* Whether path is (or resolves to) a held-out text: one of `sources`, or anything under
 * the folders they come from. */
static bool is_held_out(const char *path)
{
    static const char *const dirs[] = {"/usr/share/common-licenses/", "/usr/share/doc/debian/"};
    char real[PATH_MAX];
    const char *cand[2] = {path, realpath(path, real) ? real : NULL};
    for (int k = 0; k < 2; k++) {
        if (!cand[k])
            continue;
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
            if (!strncmp(cand[k], dirs[i], strlen(dirs[i])))
                return true;
        for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
            char rs[PATH_MAX];
            if (!strcmp(cand[k], sources[i].path) || (realpath(sources[i].path, rs) && !strcmp(cand[k], rs)))
                return true;
        }
    }
    return false;
}

enum okv_status okv_eval_ctx_create_files(const okv_tokenizer *tok, const char *const *paths, int n_paths,
                                          okv_eval_ctx **out)
{
    *out = NULL;
    if (!tok)
        return okv_set_error(OKV_ERR_INVALID_ARG, "eval: the model has no tokenizer");
    for (int i = 0; i < n_paths; i++)
        if (is_held_out(paths[i]))
            return okv_set_error(OKV_ERR_INVALID_ARG, "eval: %s is held-out evaluation text; it cannot be a "
                                 "training text", paths[i]);
    okv_eval_ctx *c = okv_calloc(1, sizeof *c, OKV_TAG_MISC);
    if (!c)
        return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
    c->tok = tok;
    c->custom = true;
    struct okv_strbuf b = {0};
    enum okv_status st = OKV_OK;
    for (int i = 0; i < n_paths && st == OKV_OK; i++) {
        size_t n;
        char *t = read_text(paths[i], &n);
        if (!t) {
            st = okv_set_error(OKV_ERR_IO, "eval: cannot read %s", paths[i]);
            break;
        }
        append_collapsed(&b, t, n);
        okv_free(t);
    }
    if (st == OKV_OK && b.oom)
        st = okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
    c->lic.text = b.s;
    c->lic.len = b.len;
    if (st == OKV_OK && b.len)
        st = cut_units(&c->lic);
    if (st == OKV_OK && c->lic.n_units < 50)
        st = okv_set_error(OKV_ERR_IO, "eval: the %d text files hold too little text (%d sentences; 50 needed)",
                           n_paths, c->lic.n_units);
    if (st == OKV_OK)
        st = collect_words(c);
    if (st == OKV_OK && c->n_words < 200)
        st = okv_set_error(OKV_ERR_IO, "eval: the text files give only %d distinct words (200 needed)", c->n_words);
    if (st != OKV_OK) {
        okv_eval_ctx_free(c);
        return st;
    }
    *out = c;
    return OKV_OK;
}

void okv_eval_ctx_free(okv_eval_ctx *c)
{
    if (!c)
        return;
    corpus_free(&c->lic);
    corpus_free(&c->essay);
    for (int i = 0; i < c->n_words; i++)
        okv_free(c->words[i]);
    okv_free(c->words);
    okv_free(c);
}

bool okv_eval_ctx_has_essays(const okv_eval_ctx *c) { return c->has_essay; }

enum okv_status okv_eval_fidelity_text(const okv_eval_ctx *c, char **text, size_t *len)
{
    *text = okv_malloc(c->lic.len + 1, OKV_TAG_MISC);
    if (!*text)
        return okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
    memcpy(*text, c->lic.text, c->lic.len + 1);
    *len = c->lic.len;
    return OKV_OK;
}
