/* Pre-tokenizers: split text into the pieces BPE merges within.
 *
 * Each is one PCRE2 pattern compiled with UTF and UCP (JIT when available),
 * applied left to right; the text between two matches, if any, is a piece of
 * its own (tokenizers' Split with the Isolated behaviour). PCRE2_MATCH_INVALID_UTF
 * lets the subject hold invalid UTF-8: no item matches those bytes, so they end
 * up in such in-between pieces and still round-trip through byte-level BPE.
 * SmolLM first isolates every numeric character (tokenizers' Digits with
 * individual_digits), then applies the GPT-2 pattern to each remaining run; as in
 * tokenizers, the second pattern sees only its run, so its lookahead stops there.
 *
 * Compiled patterns are read-only and shared; every call makes its own match data. */
#include "tok_internal.h"

#include <string.h>

static const char PAT_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char PAT_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PAT_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PAT_DIGIT[] = "\\p{N}";

const char *okv_pretok_pattern(enum okv_pretok p)
{
    switch (p) {
    case OKV_PRETOK_LLAMA3: return PAT_LLAMA3;
    case OKV_PRETOK_QWEN2: return PAT_QWEN2;
    case OKV_PRETOK_GPT2:
    case OKV_PRETOK_SMOLLM:
    default: return PAT_GPT2;
    }
}

static void *re_malloc(size_t n, void *user) { (void)user; return okv_malloc(n, OKV_TAG_TOKENIZER); }
static void re_free(void *p, void *user) { (void)user; okv_free(p); }

static enum okv_status compile_one(okv_tokenizer *t, const char *pat, struct okv_pretok_re *re)
{
    pcre2_compile_context *cc = pcre2_compile_context_create(t->re_gctx);
    if (!cc)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for the pre-tokenizer", t->src);
    int err = 0;
    PCRE2_SIZE erroff = 0;
    re->code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &erroff, cc);
    pcre2_compile_context_free(cc);
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        return okv_set_error(OKV_ERR_INTERNAL, "%s: pre-tokenizer pattern at %zu: %s",
                             t->src, (size_t)erroff, (const char *)msg);
    }
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    return OKV_OK;
}

enum okv_status okv_pretok_compile(okv_tokenizer *t)
{
    t->re_gctx = pcre2_general_context_create(re_malloc, re_free, NULL);
    if (!t->re_gctx)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for the pre-tokenizer", t->src);
    enum okv_status st = compile_one(t, okv_pretok_pattern(t->pretok), &t->re);
    if (st == OKV_OK && t->pretok == OKV_PRETOK_SMOLLM)
        st = compile_one(t, PAT_DIGIT, &t->re_digit);
    return st;
}

void okv_pretok_release(okv_tokenizer *t)
{
    pcre2_code_free(t->re.code);
    pcre2_code_free(t->re_digit.code);
    t->re.code = t->re_digit.code = NULL;
    pcre2_general_context_free(t->re_gctx);
    t->re_gctx = NULL;
}

/* Next match of re in s[0..len) at or after off: [*ms, *me). 0 = found, 1 = none,
 * <0 = error. Falls back to the interpreter when the JIT stack runs out. */
static int next_match(const okv_tokenizer *t, const struct okv_pretok_re *re, pcre2_match_data *md,
                      const char *s, size_t len, size_t off, size_t *ms, size_t *me)
{
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, off, 0, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, off, PCRE2_NO_JIT, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 1;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof(msg));
        okv_set_error(OKV_ERR_INTERNAL, "%s: pre-tokenizer match failed: %s", t->src, (const char *)msg);
        return -1;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return 0;
}

/* Split s[0..len) with re, calling fn for every match and every gap between them. */
static enum okv_status split_with(const okv_tokenizer *t, const struct okv_pretok_re *re,
                                  pcre2_match_data *md, const char *s, size_t len,
                                  okv_pretok_fn fn, void *user)
{
    size_t off = 0;
    enum okv_status st;
    while (off < len) {
        size_t ms, me;
        int rc = next_match(t, re, md, s, len, off, &ms, &me);
        if (rc < 0)
            return OKV_ERR_INTERNAL;
        if (rc == 1)
            return fn(user, s + off, len - off);
        if (me <= ms) {         /* no item matches empty, but never loop */
            me = ms + 1;
        }
        if (ms > off && (st = fn(user, s + off, ms - off)) != OKV_OK)
            return st;
        if ((st = fn(user, s + ms, me - ms)) != OKV_OK)
            return st;
        off = me;
    }
    return OKV_OK;
}

enum okv_status okv_pretok_split(const okv_tokenizer *t, const char *text, size_t len,
                                 okv_pretok_fn fn, void *user)
{
    if (len == 0)
        return OKV_OK;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re.code, t->re_gctx);
    if (!md)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for regex match data", t->src);
    enum okv_status st = OKV_OK;
    if (t->pretok != OKV_PRETOK_SMOLLM) {
        st = split_with(t, &t->re, md, text, len, fn, user);
    } else {
        /* Isolate each numeric character, then split the runs between them. */
        pcre2_match_data *mdd = pcre2_match_data_create_from_pattern(t->re_digit.code, t->re_gctx);
        if (!mdd) {
            pcre2_match_data_free(md);
            return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for regex match data", t->src);
        }
        size_t off = 0;
        while (off < len && st == OKV_OK) {
            size_t ms, me;
            int rc = next_match(t, &t->re_digit, mdd, text, len, off, &ms, &me);
            if (rc < 0) {
                st = OKV_ERR_INTERNAL;
                break;
            }
            if (rc == 1) {
                st = split_with(t, &t->re, md, text + off, len - off, fn, user);
                break;
            }
            if (ms > off)
                st = split_with(t, &t->re, md, text + off, ms - off, fn, user);
            if (st == OKV_OK)
                st = fn(user, text + ms, me - ms);
            off = me;
        }
        pcre2_match_data_free(mdd);
    }
    pcre2_match_data_free(md);
    return st;
}
