/* Stop-string matching over streamed text, shared by the single-sequence loop
 * (generate.c) and the scheduler: where a stop string first occurs, and how much of
 * the text's tail must be held back from the stream because it may start one. */
#ifndef OKV_ENGINE_STOPSTR_H
#define OKV_ENGINE_STOPSTR_H

#include <string.h>

/* Position of the first stop string in text[0..len) that ends after byte from
 * (earlier text was already checked), or -1; *match_len (may be NULL): its length (of the
 * first in the list among those found there). */
static inline long okv_stop_find(const char *text, size_t len, size_t from, const char *const *stop, int n_stop,
                                 size_t *match_len)
{
    long best = -1;
    for (int i = 0; i < n_stop; i++) {
        size_t sl = strlen(stop[i]);
        if (!sl || sl > len)
            continue;
        size_t start = from > sl ? from - sl + 1 : 0;
        for (size_t p = start; p + sl <= len; p++)
            if (!memcmp(text + p, stop[i], sl)) {
                if (best < 0 || (long)p < best) {
                    best = (long)p;
                    if (match_len)
                        *match_len = sl;
                }
                break;
            }
    }
    return best;
}

/* Length of the longest suffix of text that is a proper prefix of a stop string:
 * that much text must be held back from the stream. */
static inline size_t okv_stop_holdback(const char *text, size_t len, const char *const *stop, int n_stop)
{
    size_t hold = 0;
    for (int i = 0; i < n_stop; i++) {
        size_t sl = strlen(stop[i]);
        if (!sl)
            continue;
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > hold; k--)
            if (!memcmp(text + len - k, stop[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

#endif
