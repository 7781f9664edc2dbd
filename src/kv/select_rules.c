/* Selection rules after the top-k (see select_rules.h). */
#include "kv/select_rules.h"

#include <stdbool.h>
#include <stddef.h>

int okv_sel_merge(const int32_t *own, int k1, const int32_t *all, int k, int32_t *out)
{
    int m = 0;
    for (int x = 0; x < k1 && m < k; x++)
        out[m++] = own[x];
    for (int x = 0; x < k && m < k; x++) {
        bool dup = false;
        for (int y = 0; y < k1 && !dup; y++)
            dup = all[x] == own[y];
        if (!dup)
            out[m++] = all[x];
    }
    return m;
}

int okv_sel_merge_rank(const int32_t *lists, int R, int stride, int k, int32_t *out)
{
    int m = 0;
    for (int x = 0; x < k && m < k; x++)
        for (int r = 0; r < R && m < k; r++) {
            const int32_t b = lists[(size_t)r * stride + x];
            bool dup = false;
            for (int y = 0; y < m && !dup; y++)
                dup = out[y] == b;
            if (!dup)
                out[m++] = b;
        }
    return m;
}

int okv_sel_rank_expand(const struct okv_select_req *reqs, const struct okv_resid_item *items, int n,
                        struct okv_select_req *out, int32_t *item_of)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < okv_sel_lists(&items[i], &reqs[i]); r++, m++) {
            out[m] = reqs[i];
            if (items[i].by_rank) {
                out[m].rows = reqs[i].rows + r;
                out[m].n_rows = 1;
            }
            if (item_of)
                item_of[m] = i;
        }
    return m;
}

void okv_sel_successors(int32_t *ids, int k, int succ, int cand_end)
{
    const int top = succ < k / 2 ? succ : k / 2;
    int last = k - 1;   /* the next entry to give up */
    for (int r = 0; r < top && last >= top; r++) {
        const int32_t nxt = ids[r] + 1;
        if (ids[r] < 0 || nxt >= cand_end)
            continue;
        bool have = false;
        for (int x = 0; x < k && !have; x++)
            have = ids[x] == nxt;
        if (!have)
            ids[last--] = nxt;
    }
}

void okv_sel_sticky(const int32_t *ids, int K, int k, const uint8_t *held, int32_t *out)
{
    const int core = 2 * k - K > 0 ? 2 * k - K : 0;
    int m = 0;
    for (int x = 0; x < core && m < k; x++)
        out[m++] = ids[x];
    for (int pass = 0; pass < 2; pass++)   /* held ones first, then the others, each in order */
        for (int x = core; x < K && m < k; x++)
            if ((held[x] != 0) == (pass == 0))
                out[m++] = ids[x];
    while (m < k)
        out[m++] = -1;
}
