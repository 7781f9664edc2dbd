/* Residency bookkeeping (src/kv/resid.c) on its own: quota chunks, the units a head
 * owns, keeping resident blocks, least-recently-used replacement, and the accessors the
 * device-side path uses (chunk, set_k, holds), and the sticky cut of select_rules. The
 * CUDA backend's copy of this policy is checked against this module in
 * tests/test_cuda_resid.c. */
#include "kv/resid.h"
#include "kv/select_rules.h"
#include "testutil.h"

#include <stdint.h>

static int unit_of_block(const okv_resid *r, int seq, int layer, int head, int block)
{
    int k = 0;
    const int32_t *sel = okv_resid_selection(r, seq, layer, &k);
    const int32_t *u = okv_resid_selection_units(r, seq, layer);
    for (int i = 0; i < k; i++)
        if (sel[head * k + i] == block)
            return u[head * k + i];
    return -1;
}

int main(void)
{
    const int32_t quota[2] = {8, 4};   /* units per chunk: 4 and 2 per head */
    struct okv_resid_params p = {2, 2, 2, 10, quota};
    okv_resid *r = NULL;
    CHECK(okv_resid_create(&p, &r) == OKV_OK, "create");
    CHECK(okv_resid_k(r, 0) == 4 && okv_resid_k(r, 1) == 2, "k per layer");
    CHECK(okv_resid_attach(r, 5) == OKV_OK && okv_resid_attach(r, 7) == OKV_OK, "attach");
    CHECK(okv_resid_chunk(r, 5) == 0 && okv_resid_chunk(r, 7) == 1 && okv_resid_chunk(r, 6) == -1, "chunks");
    CHECK(okv_resid_attach(r, 9) == OKV_ERR_NO_KV_SPACE, "a third sequence has no chunk");
    CHECK(okv_resid_free_chunks(r) == 0, "no chunk free");

    int32_t fb[8], fh[8], fu[8];
    /* seq 7 (chunk 1), layer 0: 3 blocks per head, all missing */
    const int32_t s1[6] = {1, 2, 3, 4, 5, 6};
    int n = okv_resid_apply(r, 7, 0, s1, 3, 1, fb, fh, fu);
    CHECK(n == 6, "%d fetched, 6 expected", n);
    for (int i = 0; i < n; i++) {
        const int rel = fu[i] - 10 - 1 * 8;   /* chunk 1 of layer 0 starts at unit 18 */
        CHECK(rel >= 0 && rel < 8 && rel % 2 == fh[i], "unit %d of head %d outside the head's units", fu[i], fh[i]);
        CHECK(unit_of_block(r, 7, 0, fh[i], fb[i]) == fu[i], "selection units disagree with the fetch");
    }
    const int u1 = unit_of_block(r, 7, 0, 0, 1), u2 = unit_of_block(r, 7, 0, 0, 2), u3 = unit_of_block(r, 7, 0, 0, 3);
    /* head 0: 2 and 3 stay, 9 is new: it takes the free unit (never used), not block 1's */
    const int32_t s2[6] = {2, 3, 9, 4, 5, 6};
    n = okv_resid_apply(r, 7, 0, s2, 3, 2, fb, fh, fu);
    CHECK(n == 1 && fb[0] == 9 && fh[0] == 0, "only block 9 of head 0 is fetched (%d)", n);
    CHECK(n == 1 && fu[0] != u1 && fu[0] != u2 && fu[0] != u3, "block 9 took a unit in use");
    CHECK(unit_of_block(r, 7, 0, 0, 2) == u2 && unit_of_block(r, 7, 0, 0, 3) == u3, "resident blocks moved");
    const int u9 = fu[0];
    /* head 0: 10 and 11 are new; the least recently used units go first: block 1's (stamp
     * 1), then the older of the stamp-2 ones by unit index */
    const int32_t s3[6] = {9, 10, 11, 4, 5, 6};
    n = okv_resid_apply(r, 7, 0, s3, 3, 3, fb, fh, fu);
    CHECK(n == 2, "%d fetched, 2 expected", n);
    CHECK(n == 2 && fu[0] == u1, "block 10 should replace block 1 (unit %d), got %d", u1, fu[0]);
    const int second = u2 < u3 ? u2 : u3;
    CHECK(n == 2 && fu[1] == second, "block 11 should take unit %d, got %d", second, fu[1]);
    CHECK(unit_of_block(r, 7, 0, 0, 9) == u9, "block 9 moved");
    /* holds: what a head's units hold, nothing else */
    CHECK(okv_resid_holds(r, 7, 0, 0, 9) && okv_resid_holds(r, 7, 0, 0, 10) && okv_resid_holds(r, 7, 0, 1, 4),
          "holds: resident blocks");
    CHECK(!okv_resid_holds(r, 7, 0, 0, 1) && !okv_resid_holds(r, 7, 0, 1, 9) && !okv_resid_holds(r, 7, 0, 0, 1000) &&
              !okv_resid_holds(r, 6, 0, 0, 9) && !okv_resid_holds(r, 7, 2, 0, 9) && !okv_resid_holds(r, 7, 0, 0, -1),
          "holds: blocks not held, unknown sequence, layer or block");
    /* a selection with -1 entries, layer 1 (2 units per head) */
    const int32_t s4[4] = {3, -1, 8, 2};
    n = okv_resid_apply(r, 7, 1, s4, 2, 4, fb, fh, fu);
    CHECK(n == 3, "%d fetched, 3 expected", n);
    /* the device path records k alone */
    okv_resid_set_k(r, 5, 1, 2);
    int k = 0;
    okv_resid_selection(r, 5, 1, &k);
    CHECK(k == 2, "set_k: %d", k);
    /* clear forgets the mappings: everything is fetched again */
    okv_resid_clear(r, 7);
    okv_resid_selection(r, 7, 0, &k);
    CHECK(k == 0, "cleared k %d", k);
    n = okv_resid_apply(r, 7, 0, s3, 3, 5, fb, fh, fu);
    CHECK(n == 6, "after clear %d fetched, 6 expected", n);
    /* detach frees the chunk for another sequence */
    okv_resid_detach(r, 5);
    CHECK(!okv_resid_attached(r, 5) && okv_resid_free_chunks(r) == 1, "detach");
    CHECK(okv_resid_attach(r, 9) == OKV_OK && okv_resid_chunk(r, 9) == 0, "chunk 0 reused");
    okv_resid_free(r);
    CHECK(okv_alloc_live_count(OKV_TAG_KV) == 0, "KV allocations leaked");

    /* sticky cut: K = 6 best first, k = 4: the best 2 stay; of the next 4, held ones first
     * (in order), then the others */
    {
        const int32_t ids[6] = {10, 11, 12, 13, 14, 15};
        const uint8_t held[6] = {0, 0, 0, 1, 0, 1};
        int32_t out[4];
        okv_sel_sticky(ids, 6, 4, held, out);
        CHECK(out[0] == 10 && out[1] == 11 && out[2] == 13 && out[3] == 15, "sticky: %d %d %d %d", out[0], out[1], out[2],
              out[3]);
        const uint8_t none[6] = {0};
        okv_sel_sticky(ids, 6, 4, none, out);
        CHECK(out[0] == 10 && out[1] == 11 && out[2] == 12 && out[3] == 13, "sticky, nothing held: the best 4");
        const uint8_t all[6] = {1, 1, 1, 1, 1, 1};
        okv_sel_sticky(ids, 6, 4, all, out);
        CHECK(out[2] == 12 && out[3] == 13, "sticky, everything held: the best 4");
        const uint8_t h0[6] = {1, 1, 0, 0, 0, 0};   /* held among the core changes nothing */
        okv_sel_sticky(ids, 6, 4, h0, out);
        CHECK(out[2] == 12 && out[3] == 13, "sticky: held blocks in the core count as any");
        okv_sel_sticky(ids, 4, 4, held, out);   /* K == k: the selection as it is */
        CHECK(out[0] == 10 && out[3] == 13, "sticky with K == k");
        const int32_t ids8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        const uint8_t h8[8] = {0, 0, 0, 0, 0, 0, 1, 1};
        okv_sel_sticky(ids8, 8, 4, h8, out);   /* K = 2k: no core, the held ones lead */
        CHECK(out[0] == 7 && out[1] == 8 && out[2] == 1 && out[3] == 2, "sticky with K = 2k: %d %d %d %d", out[0], out[1],
              out[2], out[3]);
    }
    {   /* lookahead's rank merge: rows' firsts in turn, then seconds, duplicates skipped */
        const int32_t lists[3 * 4] = {5, 9, 2, 7,    /* row 0 (the real token), best first */
                                      9, 5, 1, 3,    /* row 1 */
                                      4, 9, 8, 6};   /* row 2 */
        int32_t out[4];
        int m = okv_sel_merge_rank(lists, 3, 4, 4, out);
        CHECK(m == 4 && out[0] == 5 && out[1] == 9 && out[2] == 4 && out[3] == 2, "rank merge: %d: %d %d %d %d", m, out[0],
              out[1], out[2], out[3]);
        m = okv_sel_merge_rank(lists, 1, 4, 4, out);   /* one row: its own list */
        CHECK(m == 4 && out[0] == 5 && out[1] == 9 && out[2] == 2 && out[3] == 7, "rank merge of one row");
        const int32_t same[2 * 2] = {3, 4, 4, 3};   /* two rows of the same blocks: k of them */
        m = okv_sel_merge_rank(same, 2, 2, 2, out);
        CHECK(m == 2 && out[0] == 3 && out[1] == 4, "rank merge of equal rows: %d", m);
    }
    {   /* the rank merge one candidate at a time (okv_sel_rank_first, what the CUDA install kernel
         * runs in parallel): the first k candidates it takes, in order, are okv_sel_merge_rank's
         * out, on random rows (each a random choice of k of a few blocks, so rows overlap) with
         * a stride beyond k as the kernel's [rows][heads][k] lists */
        uint64_t s = 0x2545f4914f6cdd1dull;
        int bad = 0, cases = 0;
        for (int t = 0; t < 400; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const int R = 1 + (int)((s >> 33) % 6), k = 1 + (int)((s >> 40) % 24), pool = k + (int)((s >> 50) % 20);
            const int stride = k * (1 + (int)((s >> 20) % 3));
            int32_t lists[6 * 72], ref[24], got[24];
            for (int r = 0; r < R; r++) {   /* a partial shuffle of 0..pool-1 */
                int32_t perm[48];
                for (int i = 0; i < pool; i++)
                    perm[i] = i * 7 + 3;
                for (int i = 0; i < k; i++) {
                    s = s * 6364136223846793005ull + 1442695040888963407ull;
                    const int j = i + (int)((s >> 33) % (uint64_t)(pool - i));
                    const int32_t x = perm[i];
                    perm[i] = perm[j];
                    perm[j] = x;
                    lists[r * stride + i] = perm[i];
                }
            }
            const int m = okv_sel_merge_rank(lists, R, stride, k, ref);
            int n = 0;
            for (int idx = 0; idx < R * k && n < k; idx++)
                if (okv_sel_rank_first(lists, R, (size_t)stride, idx / R, idx % R))
                    got[n++] = lists[(idx % R) * stride + idx / R];
            bad += m != k || n != k || memcmp(ref, got, sizeof(int32_t) * (size_t)k);
            cases++;
        }
        CHECK(bad == 0, "rank merge: the candidate rule differs from okv_sel_merge_rank in %d of %d cases", bad, cases);
    }
    printf("test_resid: %d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}
