/* Tokenizer from a Hugging Face tokenizer.json (+ tokenizer_config.json).
 *
 * tokenizer.json fields read:
 *   model.type "BPE"; model.vocab {string: id}; model.merges ["a b", ...] or
 *   [["a", "b"], ...] (newer files), rank = index; model.ignore_merges; model.unk_token
 *   added_tokens [{id, content, special}]: special ones are matched only with
 *     parse_special, the others always (tokenizers' behaviour)
 *   pre_tokenizer, recognised forms:
 *     ByteLevel{use_regex: true}                                  -> GPT-2
 *     Sequence[Digits{individual_digits: true}, ByteLevel{use_regex: true}] -> SmolLM
 *     Sequence[Split{Regex: P, Isolated}, ByteLevel{use_regex: false}]
 *       with P the Llama-3, Qwen2 or GPT-2 pattern                -> that one
 *   post_processor TemplateProcessing (alone or in a Sequence) starting with a
 *     special token: that token is BOS and encode adds it by default
 * tokenizer_config.json (okv_tokenizer_from_hf_dir only): bos_token, eos_token
 * (strings or {content}), add_bos_token, chat_template (a string, or a list of
 * {name, template} of which "default" is taken); else chat_template.jinja. */
#include "tok_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#define MAX_FILE_BYTES ((size_t)1 << 30)

static enum okv_status read_file(const char *path, char **buf, size_t *len)
{
    *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return okv_set_error(OKV_ERR_IO, "%s: cannot open", path);
    enum okv_status st = OKV_OK;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || (size_t)size > MAX_FILE_BYTES || fseek(f, 0, SEEK_SET) != 0) {
        st = okv_set_error(OKV_ERR_IO, "%s: cannot get the size (or over 1 GiB)", path);
        goto close_file;
    }
    *buf = okv_malloc((size_t)size + 1, OKV_TAG_TOKENIZER);
    if (!*buf) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for %ld bytes", path, size);
        goto close_file;
    }
    if (fread(*buf, 1, (size_t)size, f) != (size_t)size) {
        okv_free(*buf);
        *buf = NULL;
        st = okv_set_error(OKV_ERR_IO, "%s: read failed", path);
        goto close_file;
    }
    (*buf)[size] = '\0';
    *len = (size_t)size;
close_file:
    fclose(f);
    return st;
}

static enum okv_status parse_json_file(const char *path, cJSON **out)
{
    char *buf;
    size_t len;
    *out = NULL;
    enum okv_status st = read_file(path, &buf, &len);
    if (st != OKV_OK)
        return st;
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(buf, len, &end, false);
    size_t at = end ? (size_t)(end - buf) : 0;
    okv_free(buf);
    if (!*out)
        return okv_set_error(OKV_ERR_FORMAT, "%s: invalid JSON near byte %zu", path, at);
    return OKV_OK;
}

static bool json_bool(const cJSON *o, const char *key, bool dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool type_is(const cJSON *o, const char *type)
{
    const char *s = json_str(o, "type");
    return s && strcmp(s, type) == 0;
}

/* A JSON number that is an integer id in [0, 2^24). */
static bool json_id(const cJSON *v, int32_t *id)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (double)(1 << 24) ||
        v->valuedouble != (double)(int32_t)v->valuedouble)
        return false;
    *id = (int32_t)v->valuedouble;
    return true;
}

static enum okv_status parse_pretok(const char *path, const cJSON *pt, enum okv_pretok *out)
{
    if (type_is(pt, "ByteLevel")) {
        if (json_bool(pt, "add_prefix_space", false) || !json_bool(pt, "use_regex", true))
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: pre_tokenizer ByteLevel with add_prefix_space or "
                                 "without use_regex is not supported", path);
        *out = OKV_PRETOK_GPT2;
        return OKV_OK;
    }
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    if (type_is(pt, "Sequence") && cJSON_GetArraySize(seq) == 2) {
        const cJSON *a = cJSON_GetArrayItem(seq, 0), *b = cJSON_GetArrayItem(seq, 1);
        bool bl = type_is(b, "ByteLevel") && !json_bool(b, "add_prefix_space", false);
        if (bl && type_is(a, "Digits") && json_bool(a, "individual_digits", false) &&
            json_bool(b, "use_regex", true)) {
            *out = OKV_PRETOK_SMOLLM;
            return OKV_OK;
        }
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(a, "pattern");
        const char *re = json_str(pat, "Regex");
        const char *beh = json_str(a, "behavior");
        if (bl && type_is(a, "Split") && re && beh && strcmp(beh, "Isolated") == 0 &&
            !json_bool(a, "invert", false) && !json_bool(b, "use_regex", true)) {
            static const enum okv_pretok kinds[] = { OKV_PRETOK_LLAMA3, OKV_PRETOK_QWEN2, OKV_PRETOK_GPT2 };
            for (size_t i = 0; i < 3; i++) {
                if (strcmp(re, okv_pretok_pattern(kinds[i])) == 0) {
                    *out = kinds[i];
                    return OKV_OK;
                }
            }
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: pre_tokenizer Split pattern \"%.80s\" is not "
                                 "the GPT-2, Llama-3 or Qwen2 pattern", path, re);
        }
    }
    return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: pre_tokenizer (type \"%s\") is not a supported "
                         "byte-level form (ByteLevel; Digits+ByteLevel; Split+ByteLevel)",
                         path, pt ? (json_str(pt, "type") ? json_str(pt, "type") : "?") : "null");
}

/* BOS from a TemplateProcessing post-processor whose "single" starts with a special token. */
static void parse_post(okv_tokenizer *t, const cJSON *pp)
{
    if (type_is(pp, "Sequence")) {
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
            parse_post(t, p);
        return;
    }
    if (!type_is(pp, "TemplateProcessing"))
        return;
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "single"), 0);
    const char *name = json_str(cJSON_GetObjectItemCaseSensitive(first, "SpecialToken"), "id");
    int32_t id = name ? okv_tok_lookup(t, name, strlen(name)) : -1;
    if (id >= 0) {
        t->bos = id;
        t->add_bos = true;
    }
}

static enum okv_status add_merges(okv_tokenizer *t, const cJSON *merges)
{
    const char *path = t->src;
    enum okv_status st = okv_tok_reserve_merges(t, (size_t)cJSON_GetArraySize(merges));
    if (st != OKV_OK)
        return st;
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        char what[48];
        snprintf(what, sizeof(what), "model.merges[%d]", i++);
        const char *a, *b;
        size_t alen, blen;
        if (cJSON_IsString(m)) {
            const char *s = m->valuestring, *sp = strchr(s, ' ');
            if (!sp || sp == s || sp[1] == '\0')
                return okv_set_error(OKV_ERR_FORMAT, "%s: %s = \"%s\" is not two tokens \"a b\"", path, what, s);
            a = s;
            alen = (size_t)(sp - s);
            b = sp + 1;
            blen = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
            a = cJSON_GetArrayItem(m, 0)->valuestring;
            b = cJSON_GetArrayItem(m, 1)->valuestring;
            alen = strlen(a);
            blen = strlen(b);
        } else {
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s is neither \"a b\" nor [\"a\", \"b\"]", path, what);
        }
        if ((st = okv_tok_add_merge(t, a, alen, b, blen, what)) != OKV_OK)
            return st;
    }
    return OKV_OK;
}

static const char *const eos_guesses[] = { "<|end_of_text|>", "<|endoftext|>", "</s>", "<|im_end|>" };

/* SentencePiece-style BPE in a tokenizer.json (Llama 2, Mistral 7B and their conversions):
 * model.byte_fallback, or a normalizer / pre-tokenizer that writes spaces as U+2581. Llama 2's
 * layout: normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer, decoder
 * ending in Strip(" ", 1, 0). Mistral's (and newer conversions'): pre-tokenizer Metaspace
 * (replacement "▁", prepend_scheme first / always / never, or the older add_prefix_space; split),
 * no normalizer, decoder Metaspace. */
struct spm_cfg {
    bool on, split, strip;
    int prepend;   /* enum okv_spm_prepend */
};

static bool is_meta_replace(const cJSON *n)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
    const char *from = json_str(pat, "String"), *to = json_str(n, "content");
    return type_is(n, "Replace") && from && to && strcmp(from, " ") == 0 && strcmp(to, "\xE2\x96\x81") == 0;
}

static enum okv_status parse_spm(const char *path, const cJSON *root, const cJSON *model, struct spm_cfg *c)
{
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    bool replace = false, prepend = false, other = false;
    if (norm && !cJSON_IsNull(norm)) {
        const cJSON *items = type_is(norm, "Sequence") ? cJSON_GetObjectItemCaseSensitive(norm, "normalizers") : NULL, *n;
        if (items) {
            cJSON_ArrayForEach(n, items) {
                if (is_meta_replace(n))
                    replace = true;
                else if (type_is(n, "Prepend") && json_str(n, "prepend") && strcmp(json_str(n, "prepend"), "\xE2\x96\x81") == 0)
                    prepend = true;
                else
                    other = true;
            }
        } else if (is_meta_replace(norm)) {
            replace = true;
        }
    }
    const bool meta = type_is(pt, "Metaspace");
    c->on = json_bool(model, "byte_fallback", false) || replace || meta;
    if (!c->on)
        return OKV_OK;
    if (other)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: a SentencePiece-style tokenizer whose normalizer does more than "
                             "Prepend(\"\xE2\x96\x81\") and Replace(\" \", \"\xE2\x96\x81\") is not supported", path);
    if (meta) {
        const char *rep = json_str(pt, "replacement");
        if (rep && strcmp(rep, "\xE2\x96\x81") != 0)
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: Metaspace replacement \"%s\" is not supported (U+2581)", path, rep);
        const char *scheme = json_str(pt, "prepend_scheme");
        if (!scheme)
            scheme = json_bool(pt, "add_prefix_space", true) ? "always" : "never";
        if (strcmp(scheme, "first") == 0)
            c->prepend = OKV_SPM_PREPEND_FIRST;
        else if (strcmp(scheme, "always") == 0)
            c->prepend = OKV_SPM_PREPEND_ALWAYS;
        else if (strcmp(scheme, "never") == 0)
            c->prepend = OKV_SPM_PREPEND_NONE;
        else
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: Metaspace prepend_scheme \"%s\" is not supported", path, scheme);
        c->split = json_bool(pt, "split", true);
        if (prepend)
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: both a Prepend normalizer and a Metaspace pre-tokenizer", path);
    } else if (pt && !cJSON_IsNull(pt)) {
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: a SentencePiece-style tokenizer (byte_fallback) with pre_tokenizer "
                             "\"%s\" is not supported (none, or Metaspace)", path, json_str(pt, "type") ? json_str(pt, "type") : "?");
    } else {
        if (!replace)
            return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: byte_fallback BPE without the normalizer Replace(\" \", "
                                 "\"\xE2\x96\x81\") or a Metaspace pre-tokenizer is not supported", path);
        c->prepend = prepend ? OKV_SPM_PREPEND_NORMALIZER : OKV_SPM_PREPEND_NONE;
    }
    /* the decoder drops the first token's leading space: Strip(" ", 1, 0) in a Sequence, or Metaspace with a prepend */
    if (type_is(dec, "Metaspace")) {
        const char *scheme = json_str(dec, "prepend_scheme");
        c->strip = scheme ? strcmp(scheme, "never") != 0 : json_bool(dec, "add_prefix_space", true);
    } else if (type_is(dec, "Sequence")) {
        const cJSON *d;
        cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(dec, "decoders")) {
            const cJSON *start = cJSON_GetObjectItemCaseSensitive(d, "start");
            if (type_is(d, "Strip") && cJSON_IsNumber(start) && start->valueint == 1)
                c->strip = true;
        }
    }
    return OKV_OK;
}

/* Build the tokenizer from a parsed tokenizer.json. */
static enum okv_status from_json(const char *path, const cJSON *root, okv_tokenizer **out)
{
    *out = NULL;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(model))
        return okv_set_error(OKV_ERR_FORMAT, "%s: \"model\" missing or not an object", path);
    if (json_str(model, "type") && !type_is(model, "BPE"))
        return okv_set_error(OKV_ERR_UNSUPPORTED, "%s: model.type \"%s\": only BPE is supported",
                             path, json_str(model, "type"));
    if (!cJSON_IsObject(vocab) || !vocab->child)
        return okv_set_error(OKV_ERR_FORMAT, "%s: model.vocab missing, empty or not an object", path);
    if (!cJSON_IsArray(merges))
        return okv_set_error(OKV_ERR_FORMAT, "%s: model.merges missing or not an array", path);
    if (added && !cJSON_IsArray(added))
        return okv_set_error(OKV_ERR_FORMAT, "%s: added_tokens is not an array", path);
    enum okv_pretok pretok = OKV_PRETOK_GPT2;
    struct spm_cfg spm = {0};
    enum okv_status st = parse_spm(path, root, model, &spm);
    if (st != OKV_OK)
        return st;
    if (!spm.on) {
        if ((st = parse_pretok(path, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &pretok)) != OKV_OK)
            return st;
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
        if (norm && !cJSON_IsNull(norm))
            OKV_LOG_WARN("%s: normalizer \"%s\" ignored", path, json_str(norm, "type") ? json_str(norm, "type") : "?");
    }

    /* The vocabulary size: the largest id + 1 over vocab and added tokens. */
    int32_t max_id = -1, id = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!json_id(e, &id))
            return okv_set_error(OKV_ERR_FORMAT, "%s: model.vocab[\"%s\"]: id is not an integer in [0, 2^24)",
                                 path, e->string);
        max_id = id > max_id ? id : max_id;
    }
    int k = 0;
    cJSON_ArrayForEach(e, added) {
        if (!json_id(cJSON_GetObjectItemCaseSensitive(e, "id"), &id) || !json_str(e, "content"))
            return okv_set_error(OKV_ERR_FORMAT, "%s: added_tokens[%d] needs an integer id in [0, 2^24) "
                                 "and a string content", path, k);
        max_id = id > max_id ? id : max_id;
        k++;
    }

    okv_tokenizer *t;
    if ((st = okv_tok_create(max_id + 1, path, &t)) != OKV_OK)
        return st;
    cJSON_ArrayForEach(e, vocab) {
        json_id(e, &id);
        if (t->tok_attr[id] != OKV_TOK_ATTR_UNUSED) {
            st = okv_set_error(OKV_ERR_FORMAT, "%s: model.vocab: id %d is given to both \"%s\" and \"%s\"",
                               path, id, t->arena + t->tok_off[id], e->string);
            goto fail;
        }
        if ((st = okv_tok_set_token(t, id, e->string, strlen(e->string), OKV_TOK_ATTR_NORMAL)) != OKV_OK)
            goto fail;
    }
    cJSON_ArrayForEach(e, added) {
        json_id(cJSON_GetObjectItemCaseSensitive(e, "id"), &id);
        const char *content = json_str(e, "content");
        enum okv_tok_attr attr = json_bool(e, "special", false) ? OKV_TOK_ATTR_CONTROL : OKV_TOK_ATTR_USER;
        if ((st = okv_tok_set_token(t, id, content, strlen(content), attr)) != OKV_OK)
            goto fail;
    }
    if ((st = okv_tok_index_vocab(t)) != OKV_OK || (st = add_merges(t, merges)) != OKV_OK)
        goto fail;

    t->pretok = pretok;
    t->ignore_merges = json_bool(model, "ignore_merges", false);
    t->spm = spm.on;
    t->spm_prepend = (uint8_t)spm.prepend;
    t->spm_split = spm.split;
    t->spm_strip = spm.strip;
    const char *unk = json_str(model, "unk_token");
    if (unk)
        t->unk = okv_tok_lookup(t, unk, strlen(unk));
    parse_post(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
    for (size_t i = 0; i < sizeof(eos_guesses) / sizeof(eos_guesses[0]) && t->eos < 0; i++) {
        int32_t g = okv_tok_lookup(t, eos_guesses[i], strlen(eos_guesses[i]));
        if (g >= 0 && t->tok_attr[g] == OKV_TOK_ATTR_CONTROL)
            t->eos = g;
    }
    *out = t;
    return OKV_OK;
fail:
    okv_tokenizer_free(t);
    return st;
}

enum okv_status okv_tokenizer_from_json_file(const char *path, okv_tokenizer **out)
{
    *out = NULL;
    cJSON *root;
    enum okv_status st = parse_json_file(path, &root);
    if (st != OKV_OK)
        return st;
    okv_tokenizer *t;
    st = from_json(path, root, &t);
    cJSON_Delete(root);
    if (st == OKV_OK && (st = okv_tok_finalize(t)) != OKV_OK) {
        okv_tokenizer_free(t);
        return st;
    }
    *out = t;
    return st;
}

/* A special-token field of tokenizer_config.json: "text" or {"content": "text"}. */
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    return cJSON_IsString(v) ? v->valuestring : json_str(v, "content");
}

static enum okv_status apply_config(okv_tokenizer *t, const char *dir, const cJSON *cfg, const char *cfg_path)
{
    const char *keys[2] = { "bos_token", "eos_token" };
    int32_t *dst[2] = { &t->bos, &t->eos };
    for (int i = 0; i < 2; i++) {
        const char *s = config_token(cfg, keys[i]);
        if (!s)
            continue;
        int32_t id = okv_tok_lookup(t, s, strlen(s));
        if (id < 0)
            return okv_set_error(OKV_ERR_FORMAT, "%s: %s \"%s\" is not in the vocabulary", cfg_path, keys[i], s);
        *dst[i] = id;
    }
    t->add_bos = json_bool(cfg, "add_bos_token", t->add_bos);

    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *s = cJSON_IsString(tpl) ? tpl->valuestring : NULL;
    const cJSON *e;
    if (cJSON_IsArray(tpl)) {
        cJSON_ArrayForEach(e, tpl) {
            const char *name = json_str(e, "name");
            if (name && strcmp(name, "default") == 0)
                s = json_str(e, "template");
        }
    }
    if (s)
        return okv_tok_set_chat_template(t, s, strlen(s));
    char path[4096];
    snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
    char *buf;
    size_t len;
    FILE *f = fopen(path, "rb");
    if (!f)
        return OKV_OK;          /* no template: the format is guessed from the vocabulary */
    fclose(f);
    enum okv_status st = read_file(path, &buf, &len);
    if (st != OKV_OK)
        return st;
    st = okv_tok_set_chat_template(t, buf, len);
    okv_free(buf);
    return st;
}

enum okv_status okv_tokenizer_from_hf_dir(const char *dir, okv_tokenizer **out)
{
    *out = NULL;
    char path[4096], cfg_path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    snprintf(cfg_path, sizeof(cfg_path), "%s/tokenizer_config.json", dir);
    cJSON *root, *cfg = NULL;
    enum okv_status st = parse_json_file(path, &root);
    if (st != OKV_OK)
        return st;
    okv_tokenizer *t = NULL;
    st = from_json(path, root, &t);
    cJSON_Delete(root);
    if (st != OKV_OK)
        return st;
    FILE *f = fopen(cfg_path, "rb");
    if (f) {
        fclose(f);
        if ((st = parse_json_file(cfg_path, &cfg)) != OKV_OK)
            goto fail;
    }
    st = apply_config(t, dir, cfg, cfg_path);   /* cfg NULL: only chat_template.jinja */
    cJSON_Delete(cfg);
    if (st != OKV_OK)
        goto fail;
    if ((st = okv_tok_finalize(t)) != OKV_OK)
        goto fail;
    *out = t;
    return OKV_OK;
fail:
    okv_tokenizer_free(t);
    return st;
}
