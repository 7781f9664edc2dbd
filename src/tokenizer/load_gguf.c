/* Tokenizer from GGUF metadata (llama.cpp's layout):
 *   tokenizer.ggml.model        "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE: Llama 2,
 *                               Mistral 7B; tokenizer.ggml.scores instead of merges, a space
 *                               prefix unless tokenizer.ggml.add_space_prefix is false)
 *   tokenizer.ggml.tokens       [string]  byte-level token strings, id = index
 *   tokenizer.ggml.token_type   [int]     1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte
 *   tokenizer.ggml.merges       [string]  "A B", rank = index
 *   tokenizer.ggml.pre          string    pre-tokenizer: "smollm", "llama-bpe"/"llama3",
 *                                         "qwen2", "gpt2" (the default)
 *   tokenizer.ggml.{bos,eos,unknown}_token_id, tokenizer.ggml.add_bos_token
 *   tokenizer.chat_template
 * Control and user-defined tokens are added tokens (raw text, matched before BPE). */
#include "tok_internal.h"
#include "oasiskv/gguf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_PRE "tokenizer.ggml.pre"

static bool str_is(const char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static enum okv_status read_id(okv_tokenizer *t, const okv_gguf *g, const char *key, int32_t *out)
{
    int64_t v;
    if (!okv_gguf_has(g, key))
        return OKV_OK;
    if (!okv_gguf_get_int(g, key, &v))
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s is not an integer", t->src, key);
    if (v < 0 || v >= t->n_vocab)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s = %lld out of range [0, %d)",
                             t->src, key, (long long)v, t->n_vocab);
    *out = (int32_t)v;
    return OKV_OK;
}

static enum okv_pretok pretok_from_name(const char *src, const char *s, size_t n, bool *ignore_merges)
{
    *ignore_merges = false;
    if (str_is(s, n, "smollm"))
        return OKV_PRETOK_SMOLLM;
    if (str_is(s, n, "llama-bpe") || str_is(s, n, "llama3") || str_is(s, n, "llama-v3")) {
        *ignore_merges = true;      /* Llama-3's tokenizer.json sets model.ignore_merges */
        return OKV_PRETOK_LLAMA3;
    }
    if (str_is(s, n, "qwen2"))
        return OKV_PRETOK_QWEN2;
    if (!str_is(s, n, "gpt2") && !str_is(s, n, "default"))
        OKV_LOG_WARN("%s: %s \"%.*s\" unknown, using the GPT-2 pre-tokenizer", src, KEY_PRE, (int)n, s);
    return OKV_PRETOK_GPT2;
}

static const float *g_scores;   /* qsort context (loading is not concurrent with itself here: see spm_scores) */

static int score_cmp(const void *a, const void *b)
{
    const float x = g_scores[*(const int32_t *)a], y = g_scores[*(const int32_t *)b];
    return x > y ? -1 : x < y ? 1 : 0;
}

/* llama.cpp's SentencePiece BPE: the dense rank of each token's score (0 = highest) */
static enum okv_status spm_scores(okv_tokenizer *t, const okv_gguf *g)
{
    enum okv_gguf_type et;
    uint64_t n = 0;
    if (!okv_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n) || n != (uint64_t)t->n_vocab)
        return okv_set_error(OKV_ERR_FORMAT, "%s: tokenizer.ggml.scores must be a float array of %d entries (one per token)",
                             t->src, t->n_vocab);
    float *sc = okv_malloc(sizeof(float) * (size_t)n, OKV_TAG_TOKENIZER);
    int32_t *ord = okv_malloc(sizeof(int32_t) * (size_t)n, OKV_TAG_TOKENIZER);
    t->spm_score_rank = okv_malloc(sizeof(int32_t) * (size_t)n, OKV_TAG_TOKENIZER);
    if (!sc || !ord || !t->spm_score_rank) {
        okv_free(sc);
        okv_free(ord);
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for the token scores", t->src);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (!okv_gguf_arr_f32(g, "tokenizer.ggml.scores", i, &sc[i]) || sc[i] != sc[i]) {
            okv_free(sc);
            okv_free(ord);
            return okv_set_error(OKV_ERR_FORMAT, "%s: tokenizer.ggml.scores[%llu] is not a number", t->src,
                                 (unsigned long long)i);
        }
        ord[i] = (int32_t)i;
    }
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;   /* qsort has no context argument */
    pthread_mutex_lock(&mu);
    g_scores = sc;
    qsort(ord, (size_t)n, sizeof *ord, score_cmp);
    pthread_mutex_unlock(&mu);
    int32_t r = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (i > 0 && sc[ord[i]] != sc[ord[i - 1]])
            r++;
        t->spm_score_rank[ord[i]] = r;
    }
    okv_free(sc);
    okv_free(ord);
    return OKV_OK;
}

static enum okv_status load(okv_tokenizer *t, const okv_gguf *g)
{
    const char *src = t->src;
    enum okv_status st;
    enum okv_gguf_type et;
    uint64_t n_types = 0, n_merges = 0;

    bool have_types = okv_gguf_has(g, KEY_TYPES);
    if (have_types && (!okv_gguf_get_arr(g, KEY_TYPES, &et, &n_types) || n_types != (uint64_t)t->n_vocab))
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s must be an integer array of %d entries (one per token)",
                             src, KEY_TYPES, t->n_vocab);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s;
        size_t len;
        int64_t type = 1;
        if (!okv_gguf_arr_str(g, KEY_TOKENS, (uint64_t)id, &s, &len))
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s[%d] is not a string", src, KEY_TOKENS, id);
        if (have_types && !okv_gguf_arr_int(g, KEY_TYPES, (uint64_t)id, &type))
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s[%d] is not an integer", src, KEY_TYPES, id);
        enum okv_tok_attr attr;
        switch (type) {
        case 0: case 1: attr = OKV_TOK_ATTR_NORMAL; break;
        case 2: case 3: attr = OKV_TOK_ATTR_CONTROL; break;
        case 4: attr = OKV_TOK_ATTR_USER; break;
        case 5: attr = OKV_TOK_ATTR_UNUSED; break;
        case 6: attr = OKV_TOK_ATTR_BYTE; break;
        default:
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s[%d] = %lld is not a known token type",
                                 src, KEY_TYPES, id, (long long)type);
        }
        if ((st = okv_tok_set_token(t, id, s, len, attr)) != OKV_OK)
            return st;
    }
    if ((st = okv_tok_index_vocab(t)) != OKV_OK)
        return st;

    if (t->spm) {   /* scores, no merges; spaces as U+2581 with a prefix, byte fallback */
        if ((st = spm_scores(t, g)) != OKV_OK)
            return st;
        bool prefix = true;
        if (okv_gguf_has(g, "tokenizer.ggml.add_space_prefix") &&
            !okv_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &prefix))
            return okv_set_error(OKV_ERR_FORMAT, "%s: tokenizer.ggml.add_space_prefix is not a bool", src);
        t->spm_prepend = prefix ? OKV_SPM_PREPEND_NORMALIZER : OKV_SPM_PREPEND_NONE;
        t->spm_strip = prefix;
    } else if (!okv_gguf_get_arr(g, KEY_MERGES, &et, &n_merges) || et != OKV_GGUF_TYPE_STRING)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s missing or not a string array", src, KEY_MERGES);
    if ((st = okv_tok_reserve_merges(t, (size_t)n_merges)) != OKV_OK)
        return st;
    for (uint64_t i = 0; i < n_merges; i++) {
        const char *s;
        size_t len;
        char what[64];
        snprintf(what, sizeof(what), "%s[%llu]", KEY_MERGES, (unsigned long long)i);
        if (!okv_gguf_arr_str(g, KEY_MERGES, i, &s, &len))
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s is not a string", src, what);
        const char *sp = memchr(s, ' ', len);
        if (!sp || sp == s || sp == s + len - 1)
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s = \"%.*s\" is not two tokens \"A B\"",
                                 src, what, (int)len, s);
        if ((st = okv_tok_add_merge(t, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp - s) - 1, what)) != OKV_OK)
            return st;
    }

    if ((st = read_id(t, g, "tokenizer.ggml.bos_token_id", &t->bos)) != OKV_OK ||
        (st = read_id(t, g, "tokenizer.ggml.eos_token_id", &t->eos)) != OKV_OK ||
        (st = read_id(t, g, "tokenizer.ggml.unknown_token_id", &t->unk)) != OKV_OK)
        return st;

    const char *pre = "gpt2";
    size_t pre_len = 4;
    if (okv_gguf_has(g, KEY_PRE) && !okv_gguf_get_str(g, KEY_PRE, &pre, &pre_len))
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s is not a string", src, KEY_PRE);
    t->pretok = t->spm ? OKV_PRETOK_GPT2 : pretok_from_name(src, pre, pre_len, &t->ignore_merges);

    /* llama.cpp adds BOS by default for SentencePiece vocabularies and Llama-3's BPE; the key overrides. */
    t->add_bos = t->spm || t->pretok == OKV_PRETOK_LLAMA3;
    if (okv_gguf_has(g, "tokenizer.ggml.add_bos_token") &&
        !okv_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos))
        return okv_set_error(OKV_ERR_FORMAT, "%s: tokenizer.ggml.add_bos_token is not a bool", src);

    const char *tpl;
    size_t tpl_len;
    if (okv_gguf_has(g, "tokenizer.chat_template")) {
        if (!okv_gguf_get_str(g, "tokenizer.chat_template", &tpl, &tpl_len))
            return okv_set_error(OKV_ERR_FORMAT, "%s: tokenizer.chat_template is not a string", src);
        if ((st = okv_tok_set_chat_template(t, tpl, tpl_len)) != OKV_OK)
            return st;
    }
    return okv_tok_finalize(t);
}

enum okv_status okv_tokenizer_from_gguf(const okv_gguf *g, okv_tokenizer **out)
{
    *out = NULL;
    const char *path = okv_gguf_path(g);
    const char *model;
    size_t model_len;
    enum okv_gguf_type et;
    uint64_t n_tokens = 0;

    if (!okv_gguf_get_str(g, KEY_MODEL, &model, &model_len))
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s missing: no tokenizer in this file", path, KEY_MODEL);
    const bool spm = str_is(model, model_len, "llama");
    if (!spm && !str_is(model, model_len, "gpt2"))
        return okv_set_error(OKV_ERR_UNSUPPORTED,
                             "%s: %s = \"%.*s\": only \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece BPE) are supported",
                             path, KEY_MODEL, (int)model_len, model);
    if (!okv_gguf_get_arr(g, KEY_TOKENS, &et, &n_tokens) || et != OKV_GGUF_TYPE_STRING)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s missing or not a string array", path, KEY_TOKENS);
    if (n_tokens == 0 || n_tokens > (1u << 24))
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s has %llu entries", path, KEY_TOKENS,
                             (unsigned long long)n_tokens);

    okv_tokenizer *t;
    enum okv_status st = okv_tok_create((int32_t)n_tokens, path, &t);
    if (st != OKV_OK)
        return st;
    t->spm = spm;
    if ((st = load(t, g)) != OKV_OK) {
        okv_tokenizer_free(t);
        return st;
    }
    *out = t;
    return OKV_OK;
}
