/* The selection rules applied after Quest's top-k, shared by the engine's host path, the
 * CPU backend's residency ops and (mirrored in CUDA) cuda_resid.cu:
 *  - lookahead merge: the real token's own best blocks first, then the best by the max over
 *    the real and drafted queries, duplicates skipped, up to k; or by rank: each row's own
 *    best blocks taken in turn (OKV_LOOKAHEAD_MERGE=rank, an experiment);
 *  - successors: the block after each of the best min(succ, k/2) blocks replaces the
 *    lowest-ranked entries, unless already selected or at/after cand_end;
 *  - sticky cut: of K > k blocks best first, the best 2k - K stay and the other places go
 *    to the rest in order, blocks the device already holds first (a block near the cut
 *    does not displace a resident one of about the same score and cost a fetch). */
#ifndef OKV_KV_SELECT_RULES_H
#define OKV_KV_SELECT_RULES_H

#include <stdint.h>

/* own[0..k1) then all[0..k) minus own, into out[0..k) (out must not alias); returns the
 * entries written (k when own and all hold distinct blocks each). */
int okv_sel_merge(const int32_t *own, int k1, const int32_t *all, int k, int32_t *out);
/* lists[r * stride + x], x < k, each of R rows' best first -> out[0..k): the rows' firsts in
 * turn, then their seconds, ..., duplicates skipped (out must not alias); returns the entries
 * written (k when the rows hold k distinct blocks together). */
int okv_sel_merge_rank(const int32_t *lists, int R, int stride, int k, int32_t *out);
/* ids[0..k), best first, in place. */
void okv_sel_successors(int32_t *ids, int k, int succ, int cand_end);
/* ids[0..K) best first, held[x] for ids[x] -> out[0..k) (k <= K <= 2k; out must not alias). */
void okv_sel_sticky(const int32_t *ids, int K, int k, const uint8_t *held, int32_t *out);

#endif
