/* The selection rules applied after Quest's top-k, shared by the engine's host path, the
 * CPU backend's residency ops and (mirrored in CUDA) cuda_resid.cu:
 *  - lookahead merge: the real token's own best blocks first, then the best by the max over
 *    the real and drafted queries, duplicates skipped, up to k; or by rank: each row's own
 *    best blocks taken in turn (okv_engine_params.merge);
 *  - successors: the block after each of the best min(succ, k/2) blocks replaces the
 *    lowest-ranked entries, unless already selected or at/after cand_end;
 *  - sticky cut: of K > k blocks best first, the best 2k - K stay and the other places go
 *    to the rest in order, blocks the device already holds first (a block near the cut
 *    does not displace a resident one of about the same score and cost a fetch). */
#ifndef OKV_KV_SELECT_RULES_H
#define OKV_KV_SELECT_RULES_H

#include "oasiskv/backend.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OKV_SEL_HD __host__ __device__
#else
#define OKV_SEL_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* own[0..k1) then all[0..k) minus own, into out[0..k) (out must not alias); returns the
 * entries written (k when own and all hold distinct blocks each). */
int okv_sel_merge(const int32_t *own, int k1, const int32_t *all, int k, int32_t *out);
/* lists[r * stride + x], x < k, each of R rows' best first -> out[0..k): the rows' firsts in
 * turn, then their seconds, ..., duplicates skipped (out must not alias); returns the entries
 * written (k when the rows hold k distinct blocks together). */
int okv_sel_merge_rank(const int32_t *lists, int R, int stride, int k, int32_t *out);
/* The rank merge one candidate at a time (cuda_resid.cu takes them in parallel): candidate
 * (x, r), lists[r * stride + x], comes in the order x * R + r and is the first to hold its
 * block unless an earlier one does (rows before r up to place x, rows after r before it; a
 * list has no repeats). okv_sel_merge_rank's out is the first k candidates for which this
 * returns 1. */
static inline OKV_SEL_HD int okv_sel_rank_first(const int32_t *lists, int R, size_t stride, int x, int r)
{
    const int32_t b = lists[(size_t)r * stride + x];
    for (int r2 = 0; r2 < R; r2++) {
        const int32_t *l2 = lists + (size_t)r2 * stride;
        const int xe = r2 < r ? x + 1 : r2 > r ? x : 0;
        for (int x2 = 0; x2 < xe; x2++)
            if (l2[x2] == b)
                return 0;
    }
    return 1;
}
/* The selections of a select_install call (backend.h): each request as it is, except a rank item's
 * (okv_resid_item.by_rank), once per row, so that its rows' lists stand side by side. */
static inline int okv_sel_lists(const struct okv_resid_item *it, const struct okv_select_req *rq)
{
    return it->by_rank ? rq->n_rows : 1;
}
/* Writes them to out and the item each belongs to to item_of (NULL: not wanted); returns how many. */
int okv_sel_rank_expand(const struct okv_select_req *reqs, const struct okv_resid_item *items, int n,
                        struct okv_select_req *out, int32_t *item_of);
/* ids[0..k), best first, in place. */
void okv_sel_successors(int32_t *ids, int k, int succ, int cand_end);
/* ids[0..K) best first, held[x] for ids[x] -> out[0..k) (k <= K <= 2k; out must not alias). */
void okv_sel_sticky(const int32_t *ids, int K, int k, const uint8_t *held, int32_t *out);

#ifdef __cplusplus
}
#endif

#endif
