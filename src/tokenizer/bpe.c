/* Encoding: added tokens first, then the pre-tokenizer, then BPE merges (byte-level BPE;
 * SentencePiece-style BPE, spm_segment below, has no pre-tokenizer and starts from characters).
 *
 * 1. Added tokens are found left to right, longest first at each position
 *    (tokenizers' leftmost-longest match); special ones only with parse_special.
 * 2. The text between them is split by the pre-tokenizer (pretok.c).
 * 3. Each piece starts as one symbol per byte (the id of the byte's byte-level
 *    character); the adjacent pair of lowest merge rank is merged, leftmost on
 *    ties, until no adjacent pair has a merge. Symbols form a linked list and
 *    candidate pairs wait in a binary heap keyed (rank, position); an entry whose
 *    symbols changed since it was pushed is stale and skipped when popped. Each
 *    merge costs O(log n), so a 10k-byte piece takes well under a millisecond.
 *
 * All scratch lives in the per-call state: encode is safe from many threads. */
#include "tok_internal.h"

#include <string.h>

struct sym {
    int32_t id;        /* -1 once merged into its left neighbour */
    int32_t prev, next;
};

struct cand {
    int32_t rank;
    int32_t left, right;        /* symbol indices */
    int32_t left_id, right_id;  /* ids when pushed: a mismatch marks it stale */
    int32_t result;
};

struct enc {
    const okv_tokenizer *t;
    int32_t *ids;
    size_t n, cap;
    struct sym *syms;
    size_t syms_cap;
    struct cand *heap;
    size_t heap_n, heap_cap;
    char *mapped;               /* byte-level form of a piece (ignore_merges) */
    size_t mapped_cap;
};

static enum okv_status grow(void **p, size_t *cap, size_t need, size_t elem, const okv_tokenizer *t)
{
    if (need <= *cap)
        return OKV_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = okv_realloc(*p, c * elem, OKV_TAG_TOKENIZER);
    if (!q)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory while encoding", t->src);
    *p = q;
    *cap = c;
    return OKV_OK;
}

static enum okv_status emit(struct enc *e, int32_t id)
{
    enum okv_status st = grow((void **)&e->ids, &e->cap, e->n + 1, sizeof(int32_t), e->t);
    if (st == OKV_OK)
        e->ids[e->n++] = id;
    return st;
}

static bool merge_find(const okv_tokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *result)
{
    if (t->spm_score_rank) {   /* llama.cpp's SentencePiece BPE: the concatenation, if it is a token */
        char buf[512];
        const uint32_t la = t->tok_len[a], lb = t->tok_len[b];
        if (la + lb > sizeof buf)
            return false;
        memcpy(buf, t->arena + t->tok_off[a], la);
        memcpy(buf + la, t->arena + t->tok_off[b], lb);
        const int32_t id = okv_tok_lookup(t, buf, la + lb);
        if (id < 0 || (t->tok_attr[id] != OKV_TOK_ATTR_NORMAL && t->tok_attr[id] != OKV_TOK_ATTR_USER))
            return false;
        *rank = t->spm_score_rank[id];
        *result = id;
        return true;
    }
    if (!t->merges)
        return false;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t x = key + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    uint32_t i = (uint32_t)(x ^ (x >> 31)) & t->merge_mask;
    while (t->merges[i].key) {
        if (t->merges[i].key == key) {
            *rank = t->merges[i].rank;
            *result = t->merges[i].result;
            return true;
        }
        i = (i + 1) & t->merge_mask;
    }
    return false;
}

static bool cand_less(const struct cand *a, const struct cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(struct enc *e, struct cand c)
{
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &e->heap[p]))
            break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = c;
}

static struct cand heap_pop(struct enc *e)
{
    struct cand top = e->heap[0];
    struct cand last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct cand *best = &last;
        if (l < n && cand_less(&e->heap[l], best)) { m = l; best = &e->heap[l]; }
        if (r < n && cand_less(&e->heap[r], best)) { m = r; }
        if (m == i)
            break;
        e->heap[i] = e->heap[m];
        i = m;
    }
    if (n)
        e->heap[i] = last;
    return top;
}

static void try_pair(struct enc *e, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    struct cand c = { .left = left, .right = right,
                      .left_id = e->syms[left].id, .right_id = e->syms[right].id };
    if (merge_find(e->t, c.left_id, c.right_id, &c.rank, &c.result))
        heap_push(e, c);
}

static void push_sym(struct enc *e, int32_t *n, int32_t id)
{
    e->syms[*n] = (struct sym){ .id = id, .prev = *n - 1, .next = -1 };
    if (*n > 0)
        e->syms[*n - 1].next = *n;
    (*n)++;
}

static enum okv_status merge_emit(struct enc *e, int32_t n);

/* room for a piece of len bytes: a symbol a byte at most, and their candidate pairs */
static enum okv_status piece_room(struct enc *e, size_t len)
{
    enum okv_status st;
    if (len > INT32_MAX / 2)
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: text piece of %zu bytes is too long", e->t->src, len);
    if ((st = grow((void **)&e->syms, &e->syms_cap, len, sizeof(struct sym), e->t)) != OKV_OK ||
        (st = grow((void **)&e->heap, &e->heap_cap, len, sizeof(struct cand), e->t)) != OKV_OK)
        return st;
    return OKV_OK;
}

/* BPE over one pre-token. */
static enum okv_status bpe_piece(void *user, const char *s, size_t len)
{
    struct enc *e = user;
    const okv_tokenizer *t = e->t;
    enum okv_status st;
    if (len == 0)
        return OKV_OK;
    if ((st = piece_room(e, len)) != OKV_OK)
        return st;

    if (t->ignore_merges) {
        if ((st = grow((void **)&e->mapped, &e->mapped_cap, 2 * len, 1, t)) != OKV_OK)
            return st;
        size_t m = 0;
        for (size_t i = 0; i < len; i++)
            m += (size_t)okv_utf8_encode(okv_tok_byte_to_cp((uint8_t)s[i]), e->mapped + m);
        int32_t id = okv_tok_lookup(t, e->mapped, m);
        if (id >= 0 && t->tok_attr[id] == OKV_TOK_ATTR_NORMAL)
            return emit(e, id);
    }

    int32_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = t->byte_to_id[(uint8_t)s[i]];
        if (id < 0)
            continue;           /* a byte the vocabulary lacks (SmolLM2 has no 0xFF): dropped, as
                                 * tokenizers (no unk_token) and llama.cpp do */
        push_sym(e, &n, id);
    }
    return merge_emit(e, n);
}

/* SentencePiece-style BPE over one piece of normalized text: a symbol per character (its
 * vocabulary id), or, for a character the vocabulary lacks, one per byte ("<0xNN>"), or the
 * unknown token (consecutive ones fused, as tokenizers' fuse_unk) */
static enum okv_status spm_piece(struct enc *e, const char *s, size_t len)
{
    const okv_tokenizer *t = e->t;
    enum okv_status st;
    if (len == 0)
        return OKV_OK;
    if ((st = piece_room(e, len)) != OKV_OK)
        return st;
    int32_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = okv_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        if (k <= 0)
            k = 1;              /* an invalid byte: its byte token */
        int32_t id = okv_tok_lookup(t, s + i, (size_t)k);
        if (id >= 0 && t->tok_attr[id] == OKV_TOK_ATTR_NORMAL) {
            push_sym(e, &n, id);
        } else {
            for (int b = 0; b < k; b++) {
                int32_t bid = t->byte_to_id[(uint8_t)s[i + b]];
                if (bid >= 0)
                    push_sym(e, &n, bid);
                else if (t->unk >= 0 && !(n > 0 && e->syms[n - 1].id == t->unk))
                    push_sym(e, &n, t->unk);
            }
        }
        i += (size_t)k;
    }
    return merge_emit(e, n);
}

/* A segment of text between added tokens, SentencePiece-style: spaces become U+2581, a leading
 * one is prepended as the tokenizer says (at_start: the segment begins the text), then BPE over
 * the whole segment, or over each piece that a U+2581 starts (spm_split). */
static enum okv_status spm_segment(struct enc *e, const char *s, size_t len, bool at_start)
{
    const okv_tokenizer *t = e->t;
    if (len == 0)
        return OKV_OK;
    static const char meta[3] = {'\xE2', '\x96', '\x81'};
    const bool starts_meta = s[0] == ' ' || (len >= 3 && memcmp(s, meta, 3) == 0);
    const bool prepend = t->spm_prepend == OKV_SPM_PREPEND_NORMALIZER ||
                         (t->spm_prepend == OKV_SPM_PREPEND_ALWAYS && !starts_meta) ||
                         (t->spm_prepend == OKV_SPM_PREPEND_FIRST && at_start && !starts_meta);
    size_t cap = 3 * len + 3, m = 0;
    enum okv_status st = grow((void **)&e->mapped, &e->mapped_cap, cap, 1, t);
    if (st != OKV_OK)
        return st;
    if (prepend) {
        memcpy(e->mapped, meta, 3);
        m = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            memcpy(e->mapped + m, meta, 3);
            m += 3;
        } else {
            e->mapped[m++] = s[i];
        }
    }
    if (!t->spm_split)
        return spm_piece(e, e->mapped, m);
    size_t from = 0;
    for (size_t i = 3; i + 3 <= m; i++)
        if (memcmp(e->mapped + i, meta, 3) == 0) {
            if ((st = spm_piece(e, e->mapped + from, i - from)) != OKV_OK)
                return st;
            from = i;
        }
    return spm_piece(e, e->mapped + from, m - from);
}

/* The symbols syms[0..n) merged by rank (leftmost on ties) and emitted. */
static enum okv_status merge_emit(struct enc *e, int32_t n)
{
    enum okv_status st;
    const okv_tokenizer *t = e->t;
    e->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        try_pair(e, i, i + 1);
    /* Each merge removes one symbol and pushes at most two pairs, so the heap
     * never holds more than len - 1 + 2 * merges <= 3 * len entries. */
    if ((st = grow((void **)&e->heap, &e->heap_cap, 3 * (size_t)n + 1, sizeof(struct cand), t)) != OKV_OK)
        return st;
    while (e->heap_n > 0) {
        struct cand c = heap_pop(e);
        struct sym *l = &e->syms[c.left], *r = &e->syms[c.right];
        if (l->id != c.left_id || r->id != c.right_id || l->next != c.right)
            continue;           /* stale */
        l->id = c.result;
        l->next = r->next;
        if (r->next >= 0)
            e->syms[r->next].prev = c.left;
        r->id = -1;
        try_pair(e, l->prev, c.left);
        try_pair(e, c.left, l->next);
    }
    for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = e->syms[i].next)
        if ((st = emit(e, e->syms[i].id)) != OKV_OK)
            return st;
    return OKV_OK;
}

/* The added token matching text at s (n bytes left), or NULL. */
static const struct okv_added_tok *match_added(const okv_tokenizer *t, const char *s, size_t n,
                                               bool parse_special)
{
    unsigned char b = (unsigned char)s[0];
    for (int32_t k = t->added_first[b]; k < t->added_first[b + 1]; k++) {
        const struct okv_added_tok *a = &t->added[k];
        if (a->special && !parse_special)
            continue;
        if (a->len <= n && memcmp(a->text, s, a->len) == 0)
            return a;           /* sorted longest first */
    }
    return NULL;
}

enum okv_status okv_tokenizer_encode(const okv_tokenizer *t, const char *text, size_t len,
                                     bool add_bos, bool parse_special,
                                     int32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (!text && len)
        return okv_set_error(OKV_ERR_INVALID_ARG, "%s: encode: NULL text", t->src);
    struct enc e = { .t = t };
    enum okv_status st = OKV_OK;
    if (add_bos && t->bos >= 0)
        st = emit(&e, t->bos);
    size_t start = 0, i = 0;
    while (st == OKV_OK && i < len) {
        const struct okv_added_tok *a = t->n_added ? match_added(t, text + i, len - i, parse_special) : NULL;
        if (!a) {
            i++;
            continue;
        }
        if (i > start)
            st = t->spm ? spm_segment(&e, text + start, i - start, start == 0)
                        : okv_pretok_split(t, text + start, i - start, bpe_piece, &e);
        if (st == OKV_OK)
            st = emit(&e, a->id);
        i += a->len;
        start = i;
    }
    if (st == OKV_OK && len > start)
        st = t->spm ? spm_segment(&e, text + start, len - start, start == 0)
                    : okv_pretok_split(t, text + start, len - start, bpe_piece, &e);
    okv_free(e.syms);
    okv_free(e.heap);
    okv_free(e.mapped);
    if (st != OKV_OK) {
        okv_free(e.ids);
        return st;
    }
    if (!e.ids && !(e.ids = okv_malloc(sizeof(int32_t), OKV_TAG_TOKENIZER)))
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: out of memory while encoding", t->src);
    *ids = e.ids;
    *n = e.n;
    return OKV_OK;
}
