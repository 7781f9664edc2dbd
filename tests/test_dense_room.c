/* label: unit */
/* Dense while room (okv_engine_params.dense_while_room; kv.h: lending).
 *
 * The cache: the quota chunks lent as group slots are handed out after the group slots
 * (lowest id first); claiming a chunk takes its free slots out of the pool and leaves the
 * blocks inside to be moved (okv_kv_seq_move_block: never into a claimed chunk); a chunk
 * given back is whole again; the counts of free and used slots follow every change.
 * kv_move copies a slot's K and V in every layer and head (checked against the host blocks
 * they were fetched from).
 * The engine: a sparse engine dense while room gives the dense engine's logits while the pool
 * has room (nothing selected or fetched); a sequence turned sparse by okv_engine_seq_demote
 * continues exactly as the same sequence demoted at the same step in an engine where its
 * window blocks had to move out of the chunk it claimed and another sequence's blocks moved
 * too; sequences that grow past the pool are demoted by the engine itself (largest first),
 * each continuing as when demoted by hand at that step, and every slot and chunk is free
 * afterwards; a demotion that must first demote another to find room for the blocks it moves
 * (a review found the inner moves landing before the outer ones, which then overwrote them)
 * leaves the other's KV intact. The scheduler: six requests that outgrow the pool together all finish, without
 * preemption, some of them demoted on the way. With a CUDA build on a GPU machine the move and engine parts run on the CUDA
 * backend too (bf16: logits within 2e-2 and the same greedy choice between placements). */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/kv.h"
#include "oasiskv/sched.h"
#include "synth_model.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

static void test_lending(okv_backend *be)
{
    const int G = 6, C = 4, NC = 3, nkv = 2, hd = 8, bs = 4, L = 2;
    struct okv_kv_geometry g = {.n_layers = L, .n_group_slots = G, .n_sparse_units = C * NC * nkv, .n_host_blocks = 16,
                                .block_size = bs, .n_kv_heads = nkv, .head_dim = hd};
    okv_kv_cache *c = NULL;
    CHECK(okv_kv_cache_create(be, &g, &c) == OKV_OK, "%s", okv_last_error());
    if (!c)
        return;
    CHECK(okv_kv_lend_chunks(c, C, NC) == OKV_OK && okv_kv_lent_chunks(c) == NC, "lend: %s", okv_last_error());
    CHECK(okv_kv_lend_chunks(c, C, NC) == OKV_ERR_INVALID_ARG, "lending twice is refused");
    CHECK(okv_kv_free_slots(c) == G + C * NC && okv_kv_used_slots(c) == 0, "all %d ids free: %d", G + C * NC,
          okv_kv_free_slots(c));
    int a, b;
    CHECK(okv_kv_seq_create(c, &a) == OKV_OK && okv_kv_seq_reserve(c, a, 8 * bs) == OKV_OK, "a: 8 blocks");
    okv_kv_seq_commit(c, a, 8 * bs);
    int nb;
    const int32_t *ga = okv_kv_seq_blocks(c, a, &nb);
    bool lowest = nb == 8;
    for (int i = 0; i < nb; i++)
        lowest &= ga[i] == i;
    CHECK(lowest, "lowest ids first: a holds slots 0..7");
    CHECK(okv_kv_chunk_used(c, 0) == 2 && okv_kv_chunk_used(c, 1) == 0, "chunk 0 holds 2 of a's blocks: %d",
          okv_kv_chunk_used(c, 0));
    /* fill a's blocks with host data through fetches, to check the moves */
    for (int blk = 0; blk < 8; blk++) {
        CHECK(be->ops->kv_host_randomize(be, okv_kv_storage(c), blk, 100 + (uint64_t)blk, 1.0f) == OKV_OK, "randomize");
        int32_t src[2], dst[2];
        for (int h = 0; h < nkv; h++) {
            src[h] = blk * nkv + h;
            dst[h] = ga[blk] * nkv + h;
        }
        for (int l = 0; l < L; l++) {
            int pend;
            double st;
            CHECK(be->ops->kv_fetch(be, okv_kv_storage(c), l, nkv, src, dst) == OKV_OK &&
                      be->ops->kv_fetch_wait(be, okv_kv_storage(c), l, &pend, &st) == OKV_OK,
                  "fetch: %s", okv_last_error());
        }
    }
    okv_kv_chunk_claim(c, 1);
    CHECK(okv_kv_free_slots(c) == G + C * NC - 8 - C && okv_kv_used_slots(c) == 8, "claimed chunk 1: %d free, %d used",
          okv_kv_free_slots(c), okv_kv_used_slots(c));
    int os, ob;
    CHECK(!okv_kv_chunk_occupant(c, 1, &os, &ob), "chunk 1 was empty");
    okv_kv_chunk_claim(c, 0);
    int moved = 0;
    int32_t from[4], to[4];
    while (okv_kv_chunk_occupant(c, 0, &os, &ob) && moved < 4) {
        CHECK(os == a && (ob == 6 || ob == 7), "occupant: seq %d block %d", os, ob);
        CHECK(okv_kv_seq_move_block(c, os, ob, &from[moved], &to[moved]) == OKV_OK, "move: %s", okv_last_error());
        CHECK(to[moved] >= G + 2 * C, "moved into chunk 2, past the claimed ones: %d", to[moved]);
        moved++;
    }
    CHECK(moved == 2, "two blocks moved out of chunk 0: %d", moved);
    CHECK(be->ops->kv_move(be, okv_kv_storage(c), moved, from, to) == OKV_OK, "kv_move: %s", okv_last_error());
    ga = okv_kv_seq_blocks(c, a, &nb);
    double worst = 0;
    static float k0[64], v0[64], k1[64], v1[64];
    for (int blk = 0; blk < 8; blk++)
        for (int l = 0; l < L; l++)
            for (int h = 0; h < nkv; h++) {
                CHECK(be->ops->kv_host_read(be, okv_kv_storage(c), l, blk, h, k0, v0) == OKV_OK &&
                          be->ops->kv_unit_read(be, okv_kv_storage(c), l, ga[blk] * nkv + h, k1, v1) == OKV_OK,
                      "read");
                for (int i = 0; i < bs * hd; i++)
                    worst = fmax(worst, fmax(fabs(k0[i] - k1[i]), fabs(v0[i] - v1[i])));
            }
    CHECK(worst == 0, "every block, moved or not, equals its host block: %g", worst);
    CHECK(okv_kv_free_slots(c) == G + C * NC - 8 - 2 * C && okv_kv_used_slots(c) == 8, "after the moves: %d free, %d used",
          okv_kv_free_slots(c), okv_kv_used_slots(c));
    /* b takes what is left: not a claimed chunk's ids */
    CHECK(okv_kv_seq_create(c, &b) == OKV_OK, "b");
    const int rest = okv_kv_free_slots(c);
    CHECK(okv_kv_seq_reserve(c, b, rest * bs) == OKV_OK, "b takes the %d free: %s", rest, okv_last_error());
    CHECK(okv_kv_seq_reserve(c, b, rest * bs + 1) == OKV_ERR_NO_KV_SPACE, "and no more");
    okv_kv_seq_commit(c, b, rest * bs);
    const int32_t *gb = okv_kv_seq_blocks(c, b, &nb);
    bool outside = true;
    for (int i = 0; i < nb; i++)
        outside &= !(gb[i] >= G && gb[i] < G + 2 * C);
    CHECK(outside, "no block of b inside a claimed chunk");
    okv_kv_seq_free(c, b);
    okv_kv_seq_free(c, a);
    okv_kv_chunk_unclaim(c, 0);
    okv_kv_chunk_unclaim(c, 1);
    CHECK(okv_kv_free_slots(c) == G + C * NC && okv_kv_used_slots(c) == 0, "everything free again: %d",
          okv_kv_free_slots(c));
    okv_kv_cache_free(c);
}

#define V 200
#define PL 200
#define STEPS 24

struct run {
    int32_t toks[STEPS];
    float logits[STEPS][V];
    int demoted_at;   /* the step before which the engine demoted the sequence (-1: never) */
};

static okv_engine *make_engine(okv_backend *be, struct synth_model *sm, int kv_budget, bool room, int max_seqs, float cf)
{
    struct okv_engine_params ep = {.block_size = 16, .max_ctx = 512, .max_seqs = max_seqs, .max_batch_tokens = 64,
                                   .kv_budget = kv_budget, .tight_device = kv_budget > 0, .cache_factor = cf,
                                   .predict = OKV_PREDICT_LOOKAHEAD, .dense_while_room = room};
    okv_engine *e = NULL;
    CHECK(okv_engine_create(&sm->m, be, &ep, &e) == OKV_OK, "engine: %s", okv_last_error());
    return e;
}

/* tokens p[from, to) in chunks of 64; the last row's logits into last */
static void prefill_from(okv_engine *e, int seq, const int32_t *p, int from, int to, float *last)
{
    static float lg[V];
    for (int at = from; at < to; at += 64) {
        const int m = to - at < 64 ? to - at : 64;
        int32_t seqs[64];
        uint8_t want[64];
        for (int i = 0; i < m; i++) {
            seqs[i] = seq;
            want[i] = at + i == to - 1;
        }
        struct okv_batch b = {.n_tokens = m, .tokens = p + at, .seq = seqs, .want_logits = want};
        CHECK(okv_engine_forward(e, &b, lg) == OKV_OK, "prefill: %s", okv_last_error());
    }
    memcpy(last, lg, sizeof(float) * V);
}

static void prefill(okv_engine *e, int seq, const int32_t *p, int n, float *last) { prefill_from(e, seq, p, 0, n, last); }

/* decode n sequences together for STEPS greedy steps from their prompts' last logits;
 * demote_step[i] >= 0: okv_engine_seq_demote(seq i) before that step */
static void decode(okv_engine *e, int n, const int *seq, const float (*first)[V], struct run *out, const int *demote_step)
{
    int32_t tok[8];
    static float lg[8 * V];
    for (int i = 0; i < n; i++) {
        tok[i] = okv_argmax(first[i], V);
        out[i].demoted_at = -1;
    }
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < n; i++)
            if (demote_step && demote_step[i] == s) {
                CHECK(okv_engine_seq_demote(e, seq[i]) == OKV_OK, "demote: %s", okv_last_error());
                CHECK(!okv_engine_seq_dense_phase(e, seq[i]), "demoted");
            }
        bool dense_before[8];
        for (int i = 0; i < n; i++)
            dense_before[i] = okv_engine_seq_dense_phase(e, seq[i]);
        uint8_t want[8];
        int32_t sq[8];
        for (int i = 0; i < n; i++) {
            want[i] = 1;
            sq[i] = seq[i];
        }
        struct okv_batch b = {.n_tokens = n, .tokens = tok, .seq = sq, .want_logits = want};
        CHECK(okv_engine_forward(e, &b, lg) == OKV_OK, "decode step %d: %s", s, okv_last_error());
        for (int i = 0; i < n; i++) {
            if (dense_before[i] && !okv_engine_seq_dense_phase(e, seq[i]))
                out[i].demoted_at = s;
            memcpy(out[i].logits[s], lg + (size_t)i * V, sizeof(float) * V);
            out[i].toks[s] = tok[i] = okv_argmax(lg + (size_t)i * V, V);
        }
    }
}

/* largest relative logit difference over the steps; *same: the greedy tokens agree */
static double compare(const struct run *a, const struct run *b, bool *same)
{
    double worst = 0;
    *same = true;
    for (int s = 0; s < STEPS; s++) {
        *same &= a->toks[s] == b->toks[s];
        for (int i = 0; i < V; i++)
            worst = fmax(worst, fabs(a->logits[s][i] - b->logits[s][i]) / (1.0 + fabs(b->logits[s][i])));
    }
    return worst;
}

static void prompts(int32_t p[3][PL])
{
    struct okv_rng rng;
    okv_rng_seed(&rng, 23);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < PL; i++)
            p[k][i] = (int32_t)(okv_rng_next(&rng) % 200);
}

static void test_engine(okv_backend *be, struct synth_model *sm, bool gpu)
{
    const double tol = gpu ? 2e-2 : 1e-4;
    static int32_t p[3][PL];
    prompts(p);
    static float first[3][V];
    static struct run r_dense, r_room, r_a, r_b[2], r_c;
    bool same;

    /* 1. room for everything: the dense engine's logits, nothing selected or fetched */
    okv_engine *d = make_engine(be, sm, 0, false, 2, 1.0f), *h = make_engine(be, sm, 112, true, 2, 4.0f);
    if (!d || !h)
        return;
    int sd, sh;
    CHECK(okv_engine_seq_create(d, &sd) == OKV_OK && okv_engine_seq_create(h, &sh) == OKV_OK, "seqs");
    CHECK(okv_engine_seq_dense_phase(h, sh) && okv_engine_dense_phase_seqs(h) == 1, "a new sequence starts dense");
    prefill(d, sd, p[0], PL, first[0]);
    prefill(h, sh, p[0], PL, first[1]);
    decode(d, 1, &sd, (const float(*)[V])first[0], &r_dense, NULL);
    decode(h, 1, &sh, (const float(*)[V])first[1], &r_room, NULL);
    double w = compare(&r_room, &r_dense, &same);
    struct okv_engine_stats st;
    okv_engine_stats_get(h, &st);
    CHECK(w <= tol && (same || gpu), "dense while room = dense: logits within %.3g", w);
    CHECK(okv_engine_seq_dense_phase(h, sh) && st.units_fetched == 0 && st.units_selected == 0 && st.demotions == 0,
          "still dense: %lld units fetched, %lld selected", (long long)st.units_fetched, (long long)st.units_selected);
    printf("  room: %d decode steps after a %d-token prompt equal the dense engine's (logits within %.2e)\n", STEPS, PL, w);
    okv_engine_free(d);

    /* 2. demoted by hand at step 5: alone (engine h) ... */
    okv_engine_seq_free(h, sh);
    CHECK(okv_kv_used_slots(okv_engine_kv(h)) == 0, "all free");
    CHECK(okv_engine_seq_create(h, &sh) == OKV_OK, "seq");
    prefill(h, sh, p[0], PL, first[0]);
    const int at5[2] = {5, 5};
    decode(h, 1, &sh, (const float(*)[V])first[0], &r_a, at5);
    okv_engine_stats_get(h, &st);
    CHECK(st.demotions == 1 && st.units_selected > 0, "demoted once, then selecting: %lld, %lld", (long long)st.demotions,
          (long long)st.units_selected);
    okv_engine_free(h);
    /* ... and beside a second sequence, in an engine whose group slots are few, so that the
     * two sequences' blocks fill the chunks and each demotion has blocks to move */
    h = make_engine(be, sm, 112, true, 2, 4.0f);
    okv_engine *one = make_engine(be, sm, 112, true, 2, 4.0f);
    if (!h || !one)
        return;
    int s2[2];
    CHECK(okv_engine_seq_create(h, &s2[0]) == OKV_OK && okv_engine_seq_create(h, &s2[1]) == OKV_OK, "seqs");
    prefill(h, s2[0], p[0], PL, first[0]);
    prefill(h, s2[1], p[1], PL, first[1]);
    const int g_slots = okv_kv_geometry(okv_engine_kv(h))->n_group_slots;
    int nb;
    const int32_t *blk1 = okv_kv_seq_blocks(okv_engine_kv(h), s2[1], &nb);
    CHECK(blk1[nb - 1] >= g_slots, "the second sequence's last blocks sit in a lent chunk (%d of %d group slots)",
          blk1[nb - 1], g_slots);
    decode(h, 2, s2, (const float(*)[V])first, r_b, at5);
    okv_engine_stats_get(h, &st);
    CHECK(st.demotions == 2 && st.blocks_moved > 0, "two demotions moved %lld blocks", (long long)st.blocks_moved);
    w = compare(&r_b[0], &r_a, &same);
    CHECK(w <= tol && (same || gpu), "demoted beside another = demoted alone: logits within %.3g", w);
    /* the second sequence alone, demoted at the same step, in its own engine */
    int s1;
    CHECK(okv_engine_seq_create(one, &s1) == OKV_OK, "seq");
    prefill(one, s1, p[1], PL, first[2]);
    decode(one, 1, &s1, (const float(*)[V])first[2], &r_c, at5);
    double w2 = compare(&r_b[1], &r_c, &same);
    CHECK(w2 <= tol && (same || gpu), "the one whose blocks moved = alone: logits within %.3g", w2);
    printf("  demotion at step 5: %lld blocks moved; logits within %.2e / %.2e of the same demotion alone\n",
           (long long)st.blocks_moved, w, w2);
    okv_engine_free(one);
    okv_engine_free(h);

    /* 3. three sequences that outgrow the pool: the engine demotes by itself, largest first */
    h = make_engine(be, sm, 112, true, 3, 1.0f);
    if (!h)
        return;
    const int total = okv_kv_free_slots(okv_engine_kv(h));
    int s3[3];
    static struct run r3[3], r3a;
    for (int i = 0; i < 3; i++) {
        CHECK(okv_engine_seq_create(h, &s3[i]) == OKV_OK, "seq");
        prefill(h, s3[i], p[i], PL - 40 * i, first[i]);
    }
    decode(h, 3, s3, (const float(*)[V])first, r3, NULL);
    okv_engine_stats_get(h, &st);
    int demoted = 0;
    for (int i = 0; i < 3; i++)
        demoted += !okv_engine_seq_dense_phase(h, s3[i]);
    CHECK(st.demotions >= 1 && demoted == st.demotions, "%lld demotions (%d sparse now) in a pool of %d blocks",
          (long long)st.demotions, demoted, total);
    CHECK(r3[0].demoted_at >= 0 || !okv_engine_seq_dense_phase(h, s3[0]), "the longest sequence went first");
    /* each demoted one continues as when demoted by hand at that step, alone */
    double w3 = 0;
    for (int i = 0; i < 3; i++) {
        okv_engine *a1 = make_engine(be, sm, 112, true, 3, 1.0f);
        if (!a1)
            return;
        int sa;
        CHECK(okv_engine_seq_create(a1, &sa) == OKV_OK, "seq");
        float f[V];
        prefill(a1, sa, p[i], PL - 40 * i, f);
        int when[1] = {okv_engine_seq_dense_phase(h, s3[i]) ? -1 : r3[i].demoted_at};
        CHECK(okv_engine_seq_dense_phase(h, s3[i]) || r3[i].demoted_at >= 0, "demoted during the decode");
        decode(a1, 1, &sa, (const float(*)[V])f, &r3a, when);
        w3 = fmax(w3, compare(&r3[i], &r3a, &same));
        CHECK(same || gpu, "sequence %d: the greedy tokens of its run alone", i);
        okv_engine_free(a1);
    }
    CHECK(w3 <= tol, "demoted by the engine = by hand at the same step: logits within %.3g", w3);
    printf("  pressure: %lld of 3 sequences demoted by the engine; each within %.2e of the same demotion alone\n",
           (long long)st.demotions, w3);
    for (int i = 0; i < 3; i++)
        okv_engine_seq_free(h, s3[i]);
    okv_kv_cache *kc = okv_engine_kv(h);
    CHECK(okv_kv_used_slots(kc) == 0 && okv_kv_free_slots(kc) == total, "every block and chunk free afterwards: %d of %d",
          okv_kv_free_slots(kc), total);
    okv_engine_free(h);
}

/* Nested demotion (after a review's repro): two group slots only, four sequences whose blocks
 * fill the lent chunks, a hole freed in one; turning the smallest sparse has to move blocks with
 * fewer free slots than blocks, so it first turns the largest (V) sparse. V then continues as V
 * turned sparse alone at the same point. */
static void test_nested(okv_backend *be, struct synth_model *sm, bool gpu)
{
    struct okv_engine_params ep = {.block_size = 16, .max_ctx = 1024, .max_seqs = 4, .max_batch_tokens = 64,
                                   .kv_budget = 112, .tight_device = true, .cache_factor = 4.0f, .kv_slots = 2,
                                   .predict = OKV_PREDICT_LOOKAHEAD, .dense_while_room = true};
    okv_engine *e = NULL, *r = NULL;
    CHECK(okv_engine_create(&sm->m, be, &ep, &e) == OKV_OK, "engine: %s", okv_last_error());
    ep.kv_slots = 0;
    CHECK(okv_engine_create(&sm->m, be, &ep, &r) == OKV_OK, "engine: %s", okv_last_error());
    if (!e || !r)
        return;
    static int32_t pv[256], ph[64], pb[16], pd[176];
    struct okv_rng rng;
    okv_rng_seed(&rng, 5);
    for (int i = 0; i < 256; i++)
        pv[i] = (int32_t)(okv_rng_next(&rng) % V);
    for (int i = 0; i < 64; i++)
        ph[i] = (int32_t)(okv_rng_next(&rng) % V);
    for (int i = 0; i < 16; i++)
        pb[i] = (int32_t)(okv_rng_next(&rng) % V);
    for (int i = 0; i < 176; i++)
        pd[i] = (int32_t)(okv_rng_next(&rng) % V);
    static float first[V], first_ref[V];
    static struct run out, ref;
    int sv, sh, sb, sd, rv;
    CHECK(okv_engine_seq_create(e, &sv) == OKV_OK && okv_engine_seq_create(e, &sh) == OKV_OK &&
              okv_engine_seq_create(e, &sb) == OKV_OK && okv_engine_seq_create(e, &sd) == OKV_OK,
          "seqs");
    prefill(e, sv, pv, 48, first);
    prefill(e, sh, ph, 64, first);
    /* V's next 208 tokens, then B and D */
    static float lg[V];
    prefill_from(e, sv, pv, 48, 256, first);
    prefill(e, sb, pb, 16, lg);
    prefill(e, sd, pd, 176, lg);
    okv_engine_seq_free(e, sh);   /* a hole in the first chunk */
    CHECK(okv_engine_seq_demote(e, sb) == OKV_OK, "demote: %s", okv_last_error());
    struct okv_engine_stats st;
    okv_engine_stats_get(e, &st);
    CHECK(!okv_engine_seq_dense_phase(e, sv) && !okv_engine_seq_dense_phase(e, sb) && st.blocks_moved > 0,
          "the smallest turned sparse turned the largest sparse first (%lld demotions, %lld blocks moved)",
          (long long)st.demotions, (long long)st.blocks_moved);
    decode(e, 1, &sv, (const float(*)[V])first, &out, NULL);
    CHECK(okv_engine_seq_create(r, &rv) == OKV_OK, "seq");
    prefill(r, rv, pv, 256, first_ref);
    const int at0[1] = {0};
    decode(r, 1, &rv, (const float(*)[V])first_ref, &ref, at0);
    bool same;
    const double w = compare(&out, &ref, &same);
    CHECK(w <= (gpu ? 2e-2 : 1e-4) && (same || gpu), "nested demotion: the largest continues as when turned sparse alone "
                                                      "(logits within %.3g)", w);
    printf("  nested demotion: %lld blocks moved; the other sequence's logits within %.2e of its demotion alone\n",
           (long long)st.blocks_moved, w);
    okv_engine_seq_free(e, sv);
    okv_engine_seq_free(e, sb);
    okv_engine_seq_free(e, sd);
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0, "all free");
    okv_engine_free(e);
    okv_engine_free(r);
}

struct sout {
    int n, preempt;
    bool done;
};

static void on_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)text;
    (void)len;
    ((struct sout *)user)->n += token >= 0;
}

static void on_finish(void *user, const struct okv_sched_result *r)
{
    ((struct sout *)user)->done = true;
    ((struct sout *)user)->preempt = r->n_preemptions;
}

static void test_sched(okv_backend *be, struct synth_model *sm)
{
    okv_engine *e = make_engine(be, sm, 112, true, 6, 1.0f);
    if (!e)
        return;
    const int total = okv_kv_free_slots(okv_engine_kv(e));
    struct okv_sched_params sp = {.max_num_seqs = 6, .max_num_batched_tokens = 64};
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    static int32_t p[3][PL];
    prompts(p);
    static struct sout o[6];
    memset(o, 0, sizeof o);
    for (int r = 0; s && r < 6; r++) {
        struct okv_sched_request rq = {.prompt = p[r % 3] + 10 * (r / 3), .n_prompt = 150, .max_tokens = 80,
                                       .ignore_eos = true, .on_token = on_token, .on_finish = on_finish, .user = &o[r]};
        uint64_t id;
        CHECK(okv_sched_submit(s, &rq, &id) == OKV_OK, "submit: %s", okv_last_error());
    }
    bool busy = true;
    for (int step = 0; s && busy && step < 4000; step++)
        CHECK(okv_sched_step(s, &busy) == OKV_OK, "step: %s", okv_last_error());
    okv_sched_free(s);
    struct okv_engine_stats st;
    okv_engine_stats_get(e, &st);
    int done = 0, preempt = 0;
    for (int r = 0; r < 6; r++) {
        done += o[r].done && o[r].n == 80;
        preempt += o[r].preempt;
    }
    CHECK(done == 6 && preempt == 0 && st.demotions >= 1,
          "scheduler: %d of 6 done, %d preemptions, %lld demotions (6 x 230 tokens, a pool of %d blocks)", done, preempt,
          (long long)st.demotions, total);
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0 && okv_kv_free_slots(okv_engine_kv(e)) == total, "all free afterwards");
    printf("  scheduler: 6 requests of 150 + 80 tokens in a pool of %d blocks: all done, %lld demoted, no preemption\n",
           total, (long long)st.demotions);
    okv_engine_free(e);
}

int main(void)
{
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 2};
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    test_lending(be);
    struct synth_model sm;
    synth_model_init(&sm, OKV_ARCH_LLAMA, 91);
    CHECK(sm.m.cfg.vocab_size == V, "synthetic vocabulary %d", sm.m.cfg.vocab_size);
    test_engine(be, &sm, false);
    test_sched(be, &sm);
    test_nested(be, &sm, false);
    okv_backend *gpu = NULL;
    if (okv_backend_create("cuda", &bp, &gpu) == OKV_OK) {
        printf("cuda backend:\n");
        test_lending(gpu);
        test_engine(gpu, &sm, true);
        test_sched(gpu, &sm);
        test_nested(gpu, &sm, true);
        okv_backend_free(gpu);
    } else {
        printf("  cuda backend: skipped (%s)\n", okv_last_error());
    }
    synth_model_free(&sm);
    okv_backend_free(be);
    CHECK(okv_alloc_live_count(OKV_TAG_KV) == 0, "KV allocations leaked");
    return tu_finish("test_dense_room");
}
