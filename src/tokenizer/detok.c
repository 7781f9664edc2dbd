/* Decoding: ids back to bytes.
 *
 * okv_tokenizer_decode concatenates the tokens' pieces (their bytes with the
 * byte-level mapping undone, computed at load) and returns them as they are, so
 * decode(encode(s)) == s for any bytes. The streaming decoder instead emits only
 * complete, valid UTF-8: bytes of a character split across tokens wait in
 * struct okv_detok, and bytes that can never form a character become U+FFFD, one
 * per maximal ill-formed subsequence (the Unicode "substitution of maximal
 * subparts" practice that Python's errors="replace" also follows). */
#include "tok_internal.h"

#include <string.h>

static bool skipped(const okv_tokenizer *t, int32_t id, bool skip_special)
{
    return skip_special && t->tok_attr[id] == OKV_TOK_ATTR_CONTROL;
}

enum okv_status okv_tokenizer_decode(const okv_tokenizer *t, const int32_t *ids, size_t n,
                                     bool skip_special, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return okv_set_error(OKV_ERR_INVALID_ARG, "%s: decode: id %d at position %zu out of range [0, %d)",
                                 t->src, ids[i], i, t->n_vocab);
        if (!skipped(t, ids[i], skip_special))
            total += t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
    }
    char *s = okv_malloc(total + 1, OKV_TAG_TOKENIZER);
    if (!s)
        return okv_set_error(OKV_ERR_NO_MEMORY, "%s: decode: out of memory for %zu bytes", t->src, total);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (skipped(t, ids[i], skip_special))
            continue;
        size_t pl = t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
        memcpy(s + k, t->piece + t->piece_off[ids[i]], pl);
        k += pl;
    }
    s[k] = '\0';
    /* SentencePiece-style decoders drop the space that the first token's U+2581 stands for */
    if (t->spm_strip && k > 0 && s[0] == ' ') {
        size_t first = 0;
        while (first < n && skipped(t, ids[first], skip_special))
            first++;
        if (first < n && t->tok_attr[ids[first]] == OKV_TOK_ATTR_NORMAL &&
            t->piece_off[ids[first] + 1] > t->piece_off[ids[first]] && t->piece[t->piece_off[ids[first]]] == ' ') {
            memmove(s, s + 1, k);
            k--;
        }
    }
    *out = s;
    *len = k;
    return OKV_OK;
}

/* How far the bytes at s (n of them) go toward one character:
 * >0  a complete valid character of that many bytes;
 *  0  a valid but incomplete prefix (all n bytes): wait for more;
 * <0  ill-formed: -k bytes form the maximal ill-formed subpart to replace. */
static int utf8_scan(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    int need;
    unsigned lo = 0x80, hi = 0xBF;   /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c == 0xE0) { need = 3; lo = 0xA0; }
    else if (c == 0xED) { need = 3; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) need = 3;
    else if (c == 0xF0) { need = 4; lo = 0x90; }
    else if (c == 0xF4) { need = 4; hi = 0x8F; }
    else if (c >= 0xF1 && c <= 0xF3) need = 4;
    else return -1;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n)
            return 0;
        unsigned b = s[i];
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h)
            return -i;
    }
    return need;
}

static const char REPLACEMENT[3] = { (char)0xEF, (char)0xBF, (char)0xBD };

int okv_detok_push(const okv_tokenizer *t, struct okv_detok *d, int32_t id, bool skip_special,
                   char *out, size_t cap)
{
    if (cap == 0)
        return -1;
    out[0] = '\0';
    if (id < 0 || id >= t->n_vocab || skipped(t, id, skip_special))
        return 0;
    const unsigned char *piece = (const unsigned char *)t->piece + t->piece_off[id];
    size_t plen = t->piece_off[id + 1] - t->piece_off[id];
    int np = d->n_pending < 0 || d->n_pending > 4 ? 0 : d->n_pending;

    /* Walk pending + piece without copying the piece: index i < np reads pending. */
    size_t total = (size_t)np + plen, i = 0, w = 0;
    unsigned char look[4];
    while (i < total) {
        size_t avail = total - i < 4 ? total - i : 4;
        for (size_t k = 0; k < avail; k++)
            look[k] = i + k < (size_t)np ? d->pending[i + k] : piece[i + k - (size_t)np];
        int r = utf8_scan(look, avail);
        if (r == 0)
            break;              /* a valid prefix at the end: keep it pending */
        const void *src = r > 0 ? (const void *)look : (const void *)REPLACEMENT;
        size_t wl = r > 0 ? (size_t)r : 3;
        if (w + wl + 1 > cap)
            return -1;
        memcpy(out + w, src, wl);
        w += wl;
        i += (size_t)(r > 0 ? r : -r);
    }
    /* Commit: what is left (< 4 bytes) becomes the new pending. */
    unsigned char rest[4];
    size_t nr = total - i;
    for (size_t k = 0; k < nr; k++)
        rest[k] = i + k < (size_t)np ? d->pending[i + k] : piece[i + k - (size_t)np];
    memcpy(d->pending, rest, nr);
    d->n_pending = (int)nr;
    out[w] = '\0';
    return (int)w;
}

int okv_detok_flush(struct okv_detok *d, char *out, size_t cap)
{
    if (cap == 0)
        return -1;
    out[0] = '\0';
    if (d->n_pending <= 0) {
        d->n_pending = 0;
        return 0;
    }
    if (cap < 4)
        return -1;
    /* Pending bytes are always one valid but incomplete prefix: one U+FFFD. */
    memcpy(out, REPLACEMENT, 3);
    out[3] = '\0';
    d->n_pending = 0;
    return 3;
}
