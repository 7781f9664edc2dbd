/* The tokenizer object: byte mapping, vocabulary and merge tables, the builder the
 * loaders call, and the read-only accessors.
 *
 * Byte-level BPE writes every byte as one printable code point (GPT-2's
 * bytes_to_unicode): the printable bytes '!'..'~', U+00A1..U+00AC and
 * U+00AE..U+00FF stand for themselves, the other 68 bytes take U+0100.. in byte
 * order (space -> U+0120, '\n' -> U+010A). Token strings in the vocabulary and the
 * merges are in that form; added tokens are raw text. */
#include "tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t okv_tok_byte_to_cp(uint8_t b)
{
    if (b <= 32)
        return 256u + b;                    /* 0..32 -> U+0100..U+0120 */
    if (b >= 127 && b <= 160)
        return 256u + 33u + (b - 127u);     /* 127..160 -> U+0121..U+0142 */
    if (b == 173)
        return 256u + 67u;                  /* soft hyphen -> U+0143 */
    return b;
}

int okv_tok_cp_to_byte(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp >= 256 && cp <= 288)
        return (int)(cp - 256);
    if (cp >= 289 && cp <= 322)
        return (int)(cp - 289 + 127);
    if (cp == 323)
        return 173;
    return -1;
}

int okv_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < (size_t)len)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

int okv_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- hashing ---- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint32_t table_size(size_t n)
{
    uint32_t size = 16;
    while (size < 2 * n + 1)
        size <<= 1;
    return size;
}

/* ---- builder ---- */

enum okv_status okv_tok_create(int32_t n_vocab, const char *src, okv_tokenizer **out)
{
    *out = NULL;
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return okv_set_error(OKV_ERR_FORMAT, "%s: vocabulary size %d out of range", src, n_vocab);
    okv_tokenizer *t = okv_calloc(1, sizeof(*t), OKV_TAG_TOKENIZER);
    if (!t)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for the tokenizer", src);
    snprintf(t->src, sizeof(t->src), "%s", src);
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->unk = -1;
    t->tok_off = okv_calloc((size_t)n_vocab, sizeof(uint32_t), OKV_TAG_TOKENIZER);
    t->tok_len = okv_calloc((size_t)n_vocab, sizeof(uint32_t), OKV_TAG_TOKENIZER);
    t->tok_attr = okv_calloc((size_t)n_vocab, 1, OKV_TAG_TOKENIZER);
    t->tok_eog = okv_calloc((size_t)n_vocab, 1, OKV_TAG_TOKENIZER);
    t->arena_cap = (size_t)n_vocab * 8 + 64;
    t->arena = okv_malloc(t->arena_cap, OKV_TAG_TOKENIZER);
    if (!t->tok_off || !t->tok_len || !t->tok_attr || !t->tok_eog || !t->arena) {
        okv_tokenizer_free(t);
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for %d tokens", src, n_vocab);
    }
    t->arena[0] = '\0';         /* offset 0: the empty string of unused ids */
    t->arena_len = 1;
    *out = t;
    return OKV_OK;
}

enum okv_status okv_tok_set_token(okv_tokenizer *t, int32_t id, const char *s, size_t len,
                                  enum okv_tok_attr attr)
{
    if (id < 0 || id >= t->n_vocab)
        return okv_set_error(OKV_ERR_FORMAT, "%s: token id %d out of range [0, %d)",
                             t->src, id, t->n_vocab);
    if (len > 65536 || memchr(s, '\0', len))
        return okv_set_error(OKV_ERR_FORMAT, "%s: token %d is too long or holds a NUL byte",
                             t->src, id);
    if (t->arena_len + len + 1 > UINT32_MAX)
        return okv_set_error(OKV_ERR_FORMAT, "%s: token strings exceed 4 GiB", t->src);
    if (t->arena_len + len + 1 > t->arena_cap) {
        size_t cap = t->arena_cap * 2;
        while (cap < t->arena_len + len + 1)
            cap *= 2;
        char *p = okv_realloc(t->arena, cap, OKV_TAG_TOKENIZER);
        if (!p)
            return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for token strings", t->src);
        t->arena = p;
        t->arena_cap = cap;
    }
    memcpy(t->arena + t->arena_len, s, len);
    t->arena[t->arena_len + len] = '\0';
    t->tok_off[id] = (uint32_t)t->arena_len;
    t->tok_len[id] = (uint32_t)len;
    t->tok_attr[id] = (uint8_t)attr;
    t->arena_len += len + 1;
    return OKV_OK;
}

int32_t okv_tok_lookup(const okv_tokenizer *t, const char *s, size_t len)
{
    if (!t->vocab_map)
        return -1;
    uint32_t i = (uint32_t)hash_bytes(s, len) & t->vocab_map_mask;
    for (;;) {
        int32_t id = t->vocab_map[i];
        if (id < 0)
            return -1;
        if (t->tok_len[id] == len && memcmp(t->arena + t->tok_off[id], s, len) == 0)
            return id;
        i = (i + 1) & t->vocab_map_mask;
    }
}

/* Index every defined token by its string. When two ids share a string the first
 * normal token wins (then the lowest id), so merges resolve to model tokens. */
enum okv_status okv_tok_index_vocab(okv_tokenizer *t)
{
    uint32_t size = table_size((size_t)t->n_vocab);
    t->vocab_map = okv_malloc((size_t)size * sizeof(int32_t), OKV_TAG_TOKENIZER);
    if (!t->vocab_map)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for the vocabulary index", t->src);
    memset(t->vocab_map, 0xff, (size_t)size * sizeof(int32_t));
    t->vocab_map_mask = size - 1;
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t id = 0; id < t->n_vocab; id++) {
            uint8_t a = t->tok_attr[id];
            if (a == OKV_TOK_ATTR_UNUSED || (pass == 0) != (a == OKV_TOK_ATTR_NORMAL || a == OKV_TOK_ATTR_BYTE))
                continue;
            const char *s = t->arena + t->tok_off[id];
            size_t len = t->tok_len[id];
            uint32_t i = (uint32_t)hash_bytes(s, len) & t->vocab_map_mask;
            bool dup = false;
            while (t->vocab_map[i] >= 0) {
                int32_t o = t->vocab_map[i];
                if (t->tok_len[o] == len && memcmp(t->arena + t->tok_off[o], s, len) == 0) {
                    dup = true;
                    break;
                }
                i = (i + 1) & t->vocab_map_mask;
            }
            if (!dup)
                t->vocab_map[i] = id;
        }
    }
    return OKV_OK;
}

enum okv_status okv_tok_reserve_merges(okv_tokenizer *t, size_t n)
{
    if (n > (size_t)1 << 26)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %zu merges is implausibly many", t->src, n);
    uint32_t size = table_size(n);
    okv_free(t->merges);
    t->merges = okv_calloc(size, sizeof(*t->merges), OKV_TAG_TOKENIZER);
    if (!t->merges)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for %zu merges", t->src, n);
    t->merge_mask = size - 1;
    t->n_merges = 0;
    return OKV_OK;
}

enum okv_status okv_tok_add_merge(okv_tokenizer *t, const char *a, size_t alen,
                                  const char *b, size_t blen, const char *what)
{
    if (!t->merges || (uint32_t)t->n_merges * 2 + 1 > t->merge_mask)
        return okv_set_error(OKV_ERR_INTERNAL, "%s: merges not reserved", t->src);
    int32_t ia = okv_tok_lookup(t, a, alen);
    int32_t ib = okv_tok_lookup(t, b, blen);
    if (ia < 0 || ib < 0)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s: token \"%.*s\" is not in the vocabulary",
                             t->src, what, (int)(ia < 0 ? alen : blen), ia < 0 ? a : b);
    char stack[256];
    char *cat = alen + blen <= sizeof(stack) ? stack : okv_malloc(alen + blen, OKV_TAG_TOKENIZER);
    if (!cat)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory", t->src);
    memcpy(cat, a, alen);
    memcpy(cat + alen, b, blen);
    int32_t ir = okv_tok_lookup(t, cat, alen + blen);
    if (cat != stack)
        okv_free(cat);
    if (ir < 0)
        return okv_set_error(OKV_ERR_FORMAT, "%s: %s: merged token \"%.*s%.*s\" is not in the vocabulary",
                             t->src, what, (int)alen, a, (int)blen, b);
    uint64_t key = (((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib) + 1;
    uint32_t i = (uint32_t)hash_u64(key) & t->merge_mask;
    while (t->merges[i].key) {
        if (t->merges[i].key == key)
            return OKV_OK;      /* a repeated merge keeps its first (lowest) rank */
        i = (i + 1) & t->merge_mask;
    }
    t->merges[i].key = key;
    t->merges[i].rank = t->n_merges++;
    t->merges[i].result = ir;
    return OKV_OK;
}

enum okv_status okv_tok_set_chat_template(okv_tokenizer *t, const char *s, size_t len)
{
    okv_free(t->chat_template);
    t->chat_template = okv_malloc(len + 1, OKV_TAG_TOKENIZER);
    if (!t->chat_template)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for the chat template", t->src);
    memcpy(t->chat_template, s, len);
    t->chat_template[len] = '\0';
    return OKV_OK;
}

static int cmp_added(const void *pa, const void *pb)
{
    const struct okv_added_tok *a = pa, *b = pb;
    unsigned char fa = (unsigned char)a->text[0], fb = (unsigned char)b->text[0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;    /* longest first */
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Bytes a token decodes to: the byte-level mapping undone when every character
 * is one of the 256, else the raw string (tokenizers' ByteLevel decoder does the
 * same); added tokens are raw text. */
/* "<0xNN>": the byte NN (SentencePiece byte fallback), or -1 */
static int spm_byte(const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    const char *h = strchr(hex, s[3]), *l = strchr(hex, s[4]);
    if (!h || !l || !s[3] || !s[4])
        return -1;
    return (int)((h - hex) * 16 + (l - hex));
}

static size_t token_piece(const okv_tokenizer *t, int32_t id, char *out)
{
    const char *s = t->arena + t->tok_off[id];
    size_t len = t->tok_len[id];
    uint8_t a = t->tok_attr[id];
    if (t->spm && (a == OKV_TOK_ATTR_NORMAL || a == OKV_TOK_ATTR_BYTE)) {
        const int b = spm_byte(s, len);
        if (b >= 0) {
            out[0] = (char)b;
            return 1;
        }
        size_t n = 0;   /* U+2581 (3 bytes) -> ' ' */
        for (size_t i = 0; i < len;) {
            if (i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                out[n++] = ' ';
                i += 3;
            } else {
                out[n++] = s[i++];
            }
        }
        return n;
    }
    if (a == OKV_TOK_ATTR_NORMAL || a == OKV_TOK_ATTR_BYTE) {
        size_t n = 0, i = 0;
        while (i < len) {
            uint32_t cp;
            int k = okv_utf8_decode((const unsigned char *)s + i, len - i, &cp);
            int b = k ? okv_tok_cp_to_byte(cp) : -1;
            if (b < 0)
                break;
            out[n++] = (char)b;
            i += (size_t)k;
        }
        if (i == len)
            return n;
    }
    memcpy(out, s, len);
    return len;
}

static const char *const eog_names[] = {
    "<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>",
    "<end_of_turn>", "<|end|>", "<|return|>", "<|file_separator|>",
};

enum okv_status okv_tok_finalize(okv_tokenizer *t)
{
    enum okv_status st;
    if (!t->vocab_map && (st = okv_tok_index_vocab(t)) != OKV_OK)
        return st;
    if (t->bos >= t->n_vocab || t->eos >= t->n_vocab || t->unk >= t->n_vocab)
        return okv_set_error(OKV_ERR_FORMAT, "%s: bos/eos/unk id (%d/%d/%d) out of range [0, %d)",
                             t->src, t->bos, t->eos, t->unk, t->n_vocab);

    for (int b = 0; b < 256; b++) {
        char s[8];
        int n = t->spm ? snprintf(s, sizeof s, "<0x%02X>", b) : okv_utf8_encode(okv_tok_byte_to_cp((uint8_t)b), s);
        t->byte_to_id[b] = okv_tok_lookup(t, s, (size_t)n);
    }

    /* Decoded pieces: never longer than the token string. */
    t->piece = okv_malloc(t->arena_len + 1, OKV_TAG_TOKENIZER);
    t->piece_off = okv_malloc(((size_t)t->n_vocab + 1) * sizeof(uint32_t), OKV_TAG_TOKENIZER);
    if (!t->piece || !t->piece_off)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for token pieces", t->src);
    size_t off = 0;
    int32_t n_added = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->piece_off[id] = (uint32_t)off;
        off += token_piece(t, id, t->piece + off);
        uint8_t a = t->tok_attr[id];
        if ((a == OKV_TOK_ATTR_CONTROL || a == OKV_TOK_ATTR_USER) && t->tok_len[id] > 0)
            n_added++;
    }
    t->piece_off[t->n_vocab] = (uint32_t)off;

    t->added = okv_calloc((size_t)n_added + 1, sizeof(*t->added), OKV_TAG_TOKENIZER);
    if (!t->added)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory for added tokens", t->src);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t a = t->tok_attr[id];
        if ((a != OKV_TOK_ATTR_CONTROL && a != OKV_TOK_ATTR_USER) || t->tok_len[id] == 0)
            continue;
        struct okv_added_tok *at = &t->added[t->n_added++];
        at->id = id;
        at->special = a == OKV_TOK_ATTR_CONTROL;
        at->len = t->tok_len[id];
        at->text = t->arena + t->tok_off[id];
    }
    qsort(t->added, (size_t)t->n_added, sizeof(*t->added), cmp_added);
    int32_t j = 0;
    for (int b = 0; b <= 256; b++) {
        while (j < t->n_added && (unsigned char)t->added[j].text[0] < b)
            j++;
        t->added_first[b] = j;
    }

    if (t->eos >= 0)
        t->tok_eog[t->eos] = 1;
    for (size_t i = 0; i < sizeof(eog_names) / sizeof(eog_names[0]); i++) {
        int32_t id = okv_tok_lookup(t, eog_names[i], strlen(eog_names[i]));
        if (id >= 0 && t->tok_attr[id] != OKV_TOK_ATTR_NORMAL)
            t->tok_eog[id] = 1;
    }
    if (t->bos >= 0 && !(t->bos_text = okv_strdup(t->arena + t->tok_off[t->bos], OKV_TAG_TOKENIZER)))
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory", t->src);

    if ((st = okv_pretok_compile(t)) != OKV_OK)
        return st;
    okv_chat_detect(t);
    return OKV_OK;
}

/* ---- public accessors ---- */

void okv_tokenizer_free(okv_tokenizer *t)
{
    if (!t)
        return;
    okv_pretok_release(t);
    okv_free(t->arena);
    okv_free(t->tok_off);
    okv_free(t->tok_len);
    okv_free(t->tok_attr);
    okv_free(t->tok_eog);
    okv_free(t->piece);
    okv_free(t->piece_off);
    okv_free(t->vocab_map);
    okv_free(t->merges);
    okv_free(t->added);
    okv_free(t->chat_template);
    okv_free(t->chat_default_system);
    okv_free(t->bos_text);
    okv_free(t->spm_score_rank);
    okv_free(t);
}

int okv_tokenizer_n_vocab(const okv_tokenizer *t) { return t->n_vocab; }
int32_t okv_tokenizer_bos(const okv_tokenizer *t) { return t->bos; }
int32_t okv_tokenizer_eos(const okv_tokenizer *t) { return t->eos; }
bool okv_tokenizer_add_bos(const okv_tokenizer *t) { return t->add_bos && t->bos >= 0; }
enum okv_pretok okv_tokenizer_pretok(const okv_tokenizer *t) { return t->pretok; }
enum okv_chat_format okv_tokenizer_chat_format(const okv_tokenizer *t) { return t->chat_format; }

bool okv_tokenizer_is_eog(const okv_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->tok_eog[id];
}

int okv_tokenizer_eog_ids(const okv_tokenizer *t, int n_ids, int32_t *out)
{
    const int n = n_ids < t->n_vocab ? n_ids : t->n_vocab;
    int k = 0;
    for (int32_t id = 0; id < n; id++)
        if (t->tok_eog[id]) {
            if (out)
                out[k] = id;
            k++;
        }
    return k;
}

const char *okv_tokenizer_piece(const okv_tokenizer *t, int32_t id, size_t *len, bool *special)
{
    *len = 0;
    if (special)
        *special = false;
    if (!t || id < 0 || id >= t->n_vocab)
        return NULL;
    if (special)
        *special = t->tok_attr[id] == OKV_TOK_ATTR_CONTROL;
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece + t->piece_off[id];
}

const char *okv_tokenizer_token_str(const okv_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    return t->arena + t->tok_off[id];
}
