/* label: unit */
/* OasisKV's invariants on the CPU backend:
 *  - with a budget at least the context, sparse equals dense bit for bit;
 *  - with every block selected (all layers dense through the selection path: host
 *    tier, fetches, staged prefill), sparse equals dense bit for bit too;
 *  - the host tier's copy of every block equals what was written, and summaries
 *    are the element-wise min/max of the keys, also after a truncation;
 *  - the selection diagnostics (OKV_SELECT_SCORE) score as documented;
 *  - a real budget fetches blocks, keeps the device tier under the dense one, and
 *    reports in-time share and recall within [0, 1];
 *  - every slot of every tier is free at the end and no allocation is left. */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "synth_model.h"
#include "testutil.h"

#define V 200
#define PROMPT 150
#define GEN 40
#define NKV_MAX 8

static int32_t prompt[PROMPT];

/* Prefill in chunks, then greedy decode GEN tokens; logits of every step kept. */
static void run(okv_engine *e, int chunk, float *logits /* [GEN][V] */, int32_t *out_tokens, int *seq_out)
{
    int seq;
    enum okv_status st = okv_engine_seq_create(e, &seq);
    CHECK(st == OKV_OK, "seq_create: %s", okv_last_error());
    int32_t seqs[256];
    uint8_t want[256];
    for (int i = 0; i < 256; i++)
        seqs[i] = seq;
    for (int at = 0; at < PROMPT; at += chunk) {
        int n = PROMPT - at < chunk ? PROMPT - at : chunk;
        memset(want, 0, sizeof want);
        want[n - 1] = at + n == PROMPT;
        struct okv_batch b = {n, prompt + at, seqs, want, NULL};
        st = okv_engine_forward(e, &b, logits);
        CHECK(st == OKV_OK, "prefill: %s", okv_last_error());
    }
    for (int s = 0; s < GEN; s++) {
        int32_t tok = okv_argmax(logits + (size_t)s * V, V);
        out_tokens[s] = tok;
        if (s + 1 == GEN)
            break;
        want[0] = 1;
        struct okv_batch b = {1, &tok, seqs, want, NULL};
        st = okv_engine_forward(e, &b, logits + (size_t)(s + 1) * V);
        CHECK(st == OKV_OK, "decode: %s", okv_last_error());
    }
    if (seq_out)
        *seq_out = seq;
    else
        okv_engine_seq_free(e, seq);
}

/* As run(), but every decode step also verifies 3 random drafted rows (is_draft)
 * and drops their KV afterwards, as speculative decoding does on rejection. Only
 * the first row's logits are kept. */
static void run_drafts(okv_engine *e, int chunk, float *logits, struct okv_rng *rng)
{
    int seq;
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "seq_create: %s", okv_last_error());
    int32_t seqs[256];
    uint8_t want[256];
    for (int i = 0; i < 256; i++)
        seqs[i] = seq;
    for (int at = 0; at < PROMPT; at += chunk) {
        int n = PROMPT - at < chunk ? PROMPT - at : chunk;
        memset(want, 0, sizeof want);
        want[n - 1] = at + n == PROMPT;
        struct okv_batch b = {n, prompt + at, seqs, want, NULL};
        CHECK(okv_engine_forward(e, &b, logits) == OKV_OK, "prefill: %s", okv_last_error());
    }
    static float four[4 * V];
    for (int s = 0; s + 1 < GEN; s++) {
        int32_t rows[4] = {okv_argmax(logits + (size_t)s * V, V)};
        uint8_t draft[4] = {0, 1, 1, 1}, w[4] = {1, 1, 1, 1};
        for (int i = 1; i < 4; i++)
            rows[i] = (int32_t)(okv_rng_next(rng) % V);
        int len0 = okv_engine_seq_len(e, seq);
        struct okv_batch b = {4, rows, seqs, w, draft};
        CHECK(okv_engine_forward(e, &b, four) == OKV_OK, "verify: %s", okv_last_error());
        memcpy(logits + (size_t)(s + 1) * V, four, sizeof(float) * V);
        CHECK(okv_engine_seq_truncate(e, seq, len0 + 1) == OKV_OK, "truncate: %s", okv_last_error());
    }
    okv_engine_seq_free(e, seq);
}

static float dense_logits[GEN * V], sparse_logits[GEN * V], dense_logits_tmp[GEN * V];
static int la_differs;   /* architectures whose layer-ahead run differs from the oracle's */
static int la_start_differs;   /* ... and with layer 0's MLP zeroed (where the estimate after attention is exact) */
static int32_t dense_tok[GEN], sparse_tok[GEN];

static okv_engine *make(struct okv_model *m, okv_backend *be, int budget, int dense_layers, enum okv_predict pred,
                        int chunk)
{
    struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = chunk, .kv_budget = budget,
                                   .dense_layers = dense_layers, .predict = pred, .track_recall = true};
    okv_engine *e = NULL;
    enum okv_status st = okv_engine_create(m, be, &ep, &e);
    CHECK(st == OKV_OK, "engine (budget %d): %s", budget, okv_last_error());
    return e;
}

static void test_arch(enum okv_arch arch, okv_backend *be)
{
    struct synth_model sm;
    synth_model_init(&sm, arch, 100 + arch);
    struct okv_rng rng;
    okv_rng_seed(&rng, 11 + arch);
    for (int i = 0; i < PROMPT; i++)
        prompt[i] = (int32_t)(okv_rng_next(&rng) % V);

    /* every run prefills in chunks of 32: bit-equality holds between runs that give the GEMMs the
     * same row counts (OpenBLAS's Zen kernels round a row differently in a 32-row and a 64-row
     * product, so a 64-token dense chunk against 32-token sparse ones differs on AMD CPUs) */
    okv_engine *dense = make(&sm.m, be, 0, 0, OKV_PREDICT_CURRENT, 32);
    int dseq;
    run(dense, 32, dense_logits, dense_tok, &dseq);

    /* budget >= context: the dense fast path */
    okv_engine *full = make(&sm.m, be, 512, 0, OKV_PREDICT_CURRENT, 32);
    run(full, 32, sparse_logits, sparse_tok, NULL);
    CHECK(!memcmp(dense_logits, sparse_logits, sizeof dense_logits), "arch %d: full budget differs from dense", arch);
    okv_engine_free(full);

    /* a device cache twice the selection (LRU): same output, never more fetches */
    {
        int64_t fetched[2];
        for (int f = 0; f < 2; f++) {
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = OKV_PREDICT_CURRENT, .cache_factor = f ? 2.0f : 1.0f};
            okv_engine *ce = NULL;
            CHECK(okv_engine_create(&sm.m, be, &ep, &ce) == OKV_OK, "cache factor: %s", okv_last_error());
            run(ce, 32, f ? sparse_logits : dense_logits_tmp, sparse_tok, NULL);
            struct okv_engine_stats cs;
            okv_engine_stats_get(ce, &cs);
            fetched[f] = cs.units_fetched;
            okv_engine_free(ce);
        }
        CHECK(!memcmp(dense_logits_tmp, sparse_logits, sizeof dense_logits), "arch %d: the cache factor changed the output", arch);
        CHECK(fetched[1] <= fetched[0], "arch %d: a larger cache fetched more (%lld > %lld)", arch, (long long)fetched[1],
              (long long)fetched[0]);
        printf("  arch %d: units fetched with cache factor 1: %lld, 2: %lld\n", arch, (long long)fetched[0], (long long)fetched[1]);
    }

    /* per-token key codes (2 bits): built by kv_write as each block fills; a real budget runs and
     * accounts them; the scores they give equal the codes2 diagnostic's, computed from the host
     * tier's keys at selection time */
    {
        size_t dev_peak[2];
        int cseq = -1;
        okv_engine *ke[2] = {NULL, NULL};
        for (int f = 0; f < 2; f++) {
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = OKV_PREDICT_CURRENT, .key_code_bits = f ? 2 : 0};
            CHECK(okv_engine_create(&sm.m, be, &ep, &ke[f]) == OKV_OK, "key codes: %s", okv_last_error());
            if (!ke[f])
                continue;
            run(ke[f], 32, f ? sparse_logits : dense_logits_tmp, sparse_tok, f ? &cseq : NULL);
            struct okv_engine_stats ks;
            okv_engine_stats_get(ke[f], &ks);
            dev_peak[f] = ks.device_bytes_peak;
            CHECK(ks.units_fetched > 0, "arch %d: key codes %d: nothing fetched", arch, f ? 2 : 0);
        }
        if (ke[0] && ke[1]) {
            CHECK(dev_peak[1] > dev_peak[0], "arch %d: the key codes are not counted in the device bytes (%zu vs %zu)", arch,
                  dev_peak[1], dev_peak[0]);
            okv_kv_cache *kc = okv_engine_kv(ke[1]);
            int nb = 0;
            const int32_t *hb = okv_kv_seq_host_blocks(kc, cseq, &nb);
            const int full = okv_engine_seq_len(ke[1], cseq) / 4, nh = sm.m.cfg.n_heads, hd = sm.m.cfg.head_dim;
            const int nkv = sm.m.cfg.n_kv_heads;
            float *qh = malloc(sizeof(float) * (size_t)nh * hd), sc1[NKV_MAX * 128], sc2[NKV_MAX * 128];
            int32_t rows[1] = {0}, cand[128], ids[NKV_MAX * 128];
            for (int i = 0; i < nh * hd; i++)
                qh[i] = (float)(okv_rng_next(&rng) % 2001) / 1000.0f - 1.0f;
            okv_bmem *q = NULL;
            CHECK(be->ops->mem_alloc(be, (size_t)nh * hd, &q) == OKV_OK &&
                  be->ops->mem_write(be, q, 0, qh, (size_t)nh * hd) == OKV_OK, "q");
            const int nc = full < 128 ? full : 128;
            for (int i = 0; i < nc; i++)
                cand[i] = hb[i];
            double worst = 0, worst_blend = 0;
            for (int l = 0; l < sm.m.cfg.n_layers && q && nc > 0 && nkv <= NKV_MAX; l++) {
                struct okv_select_req req = {rows, 1, cand, nc, 1};
                setenv("OKV_CODES_BLEND", "0", 1);   /* the codes' max alone, against the diagnostic's */
                CHECK(be->ops->select_blocks(be, okv_kv_storage(kc), l, q, nh, &req, 1, ids, sc1) == OKV_OK, "codes: %s",
                      okv_last_error());
                unsetenv("OKV_CODES_BLEND");
                setenv("OKV_SELECT_SCORE", "codes2", 1);
                CHECK(be->ops->select_blocks(be, okv_kv_storage(kc), l, q, nh, &req, 1, ids, sc2) == OKV_OK, "diag: %s",
                      okv_last_error());
                unsetenv("OKV_SELECT_SCORE");
                /* OKV_CODES_BLEND=1 (a diagnostic) weighs the codes by 0 and Quest's bound by 1 */
                float sc3[NKV_MAX * 128];
                setenv("OKV_CODES_BLEND", "1", 1);
                CHECK(be->ops->select_blocks(be, okv_kv_storage(kc), l, q, nh, &req, 1, ids, sc3) == OKV_OK, "blend: %s",
                      okv_last_error());
                unsetenv("OKV_CODES_BLEND");
                /* the stored codes score with the weights w_d = (q_d / 3) (kmax_d - kmin_d) rounded to int8
                 * steps of s = max |w_d| / 127 (backend.h): at most hd * 3 * s / 2 from the diagnostic's
                 * float sum of the same codes, per query head; measured relative to that bound */
                const int group = nh / nkv;
                for (int h = 0; h < nkv; h++)
                    for (int i = 0; i < nc; i++) {
                        float kmin[256], kmax[256];
                        CHECK(hd <= 256 && be->ops->kv_summary_read(be, okv_kv_storage(kc), l, cand[i], h, kmin, kmax) == OKV_OK,
                              "summary read");
                        double bound = 0, quest = -INFINITY;
                        for (int g = 0; g < group; g++) {
                            double qb = 0;
                            for (int d = 0; d < hd; d++) {
                                const double qd = qh[(size_t)(h * group + g) * hd + d];
                                qb += fmax(qd * kmin[d], qd * kmax[d]);
                            }
                            quest = fmax(quest, qb);
                        }
                        const double qe = fabs(sc3[h * nc + i] - quest) / (1.0 + fabs(quest));
                        worst_blend = qe > worst_blend ? qe : worst_blend;
                        for (int g = 0; g < group; g++) {
                            double mw = 0;
                            for (int d = 0; d < hd; d++)
                                mw = fmax(mw, fabs((double)qh[(size_t)(h * group + g) * hd + d] * (kmax[d] - kmin[d]) / 3.0));
                            bound = fmax(bound, hd * 3.0 * (mw / 127.0) / 2.0);
                        }
                        const double diff = fabs((double)sc1[h * nc + i] - sc2[h * nc + i]);
                        const double e = diff / (bound + 1e-5 * (1.0 + fabs((double)sc2[h * nc + i])));
                        worst = e > worst ? e : worst;
                    }
            }
            CHECK(nc >= 8, "arch %d: only %d full blocks to score", arch, nc);
            CHECK(worst_blend <= 1e-5, "arch %d: OKV_CODES_BLEND=1 differs from Quest's bound by %.3g", arch, worst_blend);
            CHECK(worst <= 1.0, "arch %d: key-code scores differ from the diagnostic's by %.3g of the int8 rounding bound", arch,
                  worst);
            printf("  arch %d: key codes: %d blocks x %d layers scored, largest difference from the diagnostic %.2f of the "
                   "int8 weights' bound; device bytes %zu -> %zu\n", arch, nc, sm.m.cfg.n_layers, worst, dev_peak[0], dev_peak[1]);
            if (q)
                be->ops->mem_free(be, q);
            free(qh);
            okv_engine_seq_free(ke[1], cseq);
        }
        for (int f = 0; f < 2; f++)
            okv_engine_free(ke[f]);
    }

    /* an FP8 E4M3 host tier: the host tier holds the prompt's layer-0 K and V (which no attention
     * precedes) as dense wrote them rounded through e4m3 (okv_f32_to_e4m3), the summaries are the
     * min / max of the stored keys, a fetch moves one byte an element and is counted so, the host
     * tier takes a quarter of the float tier's bytes, and a real budget runs. (How far the rounding
     * moves a real model's answers: tests/sh/test_eval_cli.sh on SmolLM2, bench/ACCURACY.md; this
     * random model's logits are too sensitive to say.) */
    {
        const int hd = sm.m.cfg.head_dim, nkv = sm.m.cfg.n_kv_heads, bsz = 4;
        size_t host_peak[2] = {0, 0};
        for (int f = 0; f < 2; f++) {
            struct okv_engine_params ep = {.block_size = bsz, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .dense_layers = sm.m.cfg.n_layers, .predict = OKV_PREDICT_CURRENT,
                                           .host_fp8 = f == 1};
            okv_engine *fe = NULL;
            CHECK(okv_engine_create(&sm.m, be, &ep, &fe) == OKV_OK, "fp8 host tier: %s", okv_last_error());
            if (!fe)
                continue;
            int fseq;
            run(fe, 32, sparse_logits, sparse_tok, &fseq);
            struct okv_engine_stats fs;
            okv_engine_stats_get(fe, &fs);
            host_peak[f] = fs.host_bytes_peak;
            const size_t hub = okv_backend_host_unit_bytes(be, okv_kv_storage(okv_engine_kv(fe)));
            CHECK(hub == (size_t)2 * bsz * hd * (f ? 1 : sizeof(float)), "arch %d: host unit of %zu bytes (fp8 %d)", arch, hub, f);
            CHECK(fs.units_fetched > 0 && fs.fetch_bytes == fs.units_fetched * (int64_t)hub,
                  "arch %d: fetch bytes %lld for %lld units of %zu bytes", arch, (long long)fs.fetch_bytes,
                  (long long)fs.units_fetched, hub);
            if (f == 0) {
                okv_engine_seq_free(fe, fseq);
                okv_engine_free(fe);
                continue;
            }
            okv_kv_cache *dk = okv_engine_kv(dense), *fk = okv_engine_kv(fe);
            int nb, nb2;
            const int32_t *dgroup = okv_kv_seq_blocks(dk, dseq, &nb);
            const int32_t *fhost = okv_kv_seq_host_blocks(fk, fseq, &nb2);
            const int len = okv_engine_seq_len(fe, fseq);
            float k1[64 * 4], v1[64 * 4], k2[64 * 4], v2[64 * 4], mn[64], mx[64];
            int bad = 0, bad_summ = 0, changed = 0, compared = 0;
            for (int l = 0; l < sm.m.cfg.n_layers && nb == nb2 && hd <= 64; l++)
                for (int blk = 0; blk < nb; blk++)
                    for (int h = 0; h < nkv; h++) {
                        be->ops->kv_unit_read(be, okv_kv_storage(dk), l, dgroup[blk] * nkv + h, k1, v1);
                        be->ops->kv_host_read(be, okv_kv_storage(fk), l, fhost[blk], h, k2, v2);
                        be->ops->kv_summary_read(be, okv_kv_storage(fk), l, fhost[blk], h, mn, mx);
                        const int valid = len - blk * bsz < bsz ? len - blk * bsz : bsz;
                        const int prompt_rows = PROMPT - blk * bsz < 0 ? 0 : PROMPT - blk * bsz < bsz ? PROMPT - blk * bsz : bsz;
                        for (int i = 0; l == 0 && i < prompt_rows * hd; i++) {
                            bad += k2[i] != okv_e4m3_to_f32(okv_f32_to_e4m3(k1[i])) ||
                                   v2[i] != okv_e4m3_to_f32(okv_f32_to_e4m3(v1[i]));
                            changed += k2[i] != k1[i];
                            compared++;
                        }
                        for (int d = 0; d < hd; d++) {
                            float lo = k2[d], hi = k2[d];
                            for (int i = 1; i < valid; i++) {
                                lo = fminf(lo, k2[i * hd + d]);
                                hi = fmaxf(hi, k2[i * hd + d]);
                            }
                            bad_summ += lo != mn[d] || hi != mx[d];
                        }
                    }
            CHECK(nb == nb2 && hd <= 64, "arch %d: fp8: %d vs %d blocks (hd %d)", arch, nb, nb2, hd);
            CHECK(bad == 0 && changed > 0, "arch %d: fp8 host tier: %d of %d elements not the e4m3 rounding of the written KV "
                  "(%d rounded)", arch, bad, compared, changed);
            CHECK(bad_summ == 0, "arch %d: fp8 host tier: %d summary entries not the stored keys' min / max", arch, bad_summ);
            printf("  arch %d: fp8 host tier: %d of %d prompt elements of layer 0 rounded, summaries from the stored keys\n",
                   arch, changed, compared);
            okv_engine_seq_free(fe, fseq);
            okv_engine_free(fe);
        }
        CHECK(host_peak[1] * 4 == host_peak[0] && host_peak[1] > 0, "arch %d: host tier bytes fp8 %zu vs float %zu", arch,
              host_peak[1], host_peak[0]);
        /* a real budget with the fp8 tier: selects, fetches, and decodes */
        struct okv_engine_params ep = {.block_size = bsz, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                       .predict = OKV_PREDICT_LOOKAHEAD, .host_fp8 = true, .key_code_bits = 2};
        okv_engine *fe = NULL;
        CHECK(okv_engine_create(&sm.m, be, &ep, &fe) == OKV_OK, "fp8 host tier, budget 40: %s", okv_last_error());
        if (fe) {
            run(fe, 32, sparse_logits, sparse_tok, NULL);
            struct okv_engine_stats fs;
            okv_engine_stats_get(fe, &fs);
            CHECK(fs.units_fetched > 0, "arch %d: fp8 host tier with a budget fetched nothing", arch);
            okv_engine_free(fe);
        }
    }

    /* tight device (servers): selection from the first block past the window; a
     * budget covering the context selects every block, exactly as dense */
    {
        struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 512,
                                       .tight_device = true};
        okv_engine *te = NULL;
        CHECK(okv_engine_create(&sm.m, be, &ep, &te) == OKV_OK, "tight: %s", okv_last_error());
        int tseq;
        run(te, 32, sparse_logits, sparse_tok, &tseq);
        CHECK(!memcmp(dense_logits, sparse_logits, sizeof dense_logits), "arch %d: tight device differs from dense", arch);
        CHECK(okv_kv_used_slots(okv_engine_kv(te)) <= 1 + 4 + 1, "tight device holds %d group slots",
              okv_kv_used_slots(okv_engine_kv(te)));
        okv_engine_seq_free(te, tseq);
        okv_engine_free(te);
    }

    /* every block selected through the sparse machinery, prefill staged (chunk 32) */
    for (int mode = 0; mode < 4; mode++) {   /* current, lookahead, oracle, layer-ahead */
        okv_engine *all = make(&sm.m, be, 40, sm.m.cfg.n_layers, (enum okv_predict)mode, 32);
        int aseq;
        run(all, 32, sparse_logits, sparse_tok, &aseq);
        CHECK(!memcmp(dense_logits, sparse_logits, sizeof dense_logits),
              "arch %d mode %d: every-block selection differs from dense", arch, mode);
        struct okv_engine_stats st;
        okv_engine_stats_get(all, &st);
        CHECK(st.units_fetched > 0, "arch %d mode %d: nothing fetched", arch, mode);
        if (mode != OKV_PREDICT_ORACLE && mode != OKV_PREDICT_LAYER_AHEAD) {   /* they select inline: no prediction */
            CHECK(st.recall_total > 0 && st.recall_hits == st.recall_total, "arch %d: recall with every block %lld/%lld",
                  arch, (long long)st.recall_hits, (long long)st.recall_total);
            CHECK(st.units_selected > 0 && st.units_in_time <= st.units_selected, "arch %d: in-time accounting", arch);
        }

        /* host tier equals the dense engine's device copy; summaries are min/max */
        if (mode == 0) {
            okv_kv_cache *dk = okv_engine_kv(dense), *ak = okv_engine_kv(all);
            int nb, nb2;
            const int32_t *dgroup = okv_kv_seq_blocks(dk, dseq, &nb);
            const int32_t *ahost = okv_kv_seq_host_blocks(ak, aseq, &nb2);
            CHECK(nb == nb2, "block counts %d vs %d", nb, nb2);
            const int hd = sm.m.cfg.head_dim, nkv = sm.m.cfg.n_kv_heads, bsz = 4;
            int len = okv_engine_seq_len(all, aseq);
            float k1[64 * 4], v1[64 * 4], k2[64 * 4], v2[64 * 4], mn[64], mx[64];
            int bad = 0, bad_summ = 0;
            for (int l = 0; l < sm.m.cfg.n_layers; l++)
                for (int blk = 0; blk < nb; blk++)
                    for (int h = 0; h < nkv; h++) {
                        be->ops->kv_unit_read(be, okv_kv_storage(dk), l, dgroup[blk] * nkv + h, k1, v1);
                        be->ops->kv_host_read(be, okv_kv_storage(ak), l, ahost[blk], h, k2, v2);
                        int valid = len - blk * bsz < bsz ? len - blk * bsz : bsz;
                        if (memcmp(k1, k2, sizeof(float) * (size_t)(valid * hd)) || memcmp(v1, v2, sizeof(float) * (size_t)(valid * hd)))
                            bad++;
                        be->ops->kv_summary_read(be, okv_kv_storage(ak), l, ahost[blk], h, mn, mx);
                        for (int d = 0; d < hd; d++) {
                            float lo = k2[d], hi = k2[d];
                            for (int i = 1; i < valid; i++) {
                                lo = fminf(lo, k2[i * hd + d]);
                                hi = fmaxf(hi, k2[i * hd + d]);
                            }
                            if (lo != mn[d] || hi != mx[d])
                                bad_summ++;
                        }
                    }
            CHECK(bad == 0, "arch %d: %d host blocks differ from what was written", arch, bad);
            CHECK(bad_summ == 0, "arch %d: %d summary entries wrong", arch, bad_summ);

            /* truncate 3 tokens (inside the window): the last block's summary is rebuilt */
            int newlen = len - 3;
            CHECK(okv_engine_seq_truncate(all, aseq, newlen) == OKV_OK, "truncate: %s", okv_last_error());
            ahost = okv_kv_seq_host_blocks(ak, aseq, &nb2);
            int last = (newlen - 1) / bsz, valid = newlen - last * bsz;
            for (int h = 0; h < nkv; h++) {
                be->ops->kv_host_read(be, okv_kv_storage(ak), 0, ahost[last], h, k2, v2);
                be->ops->kv_summary_read(be, okv_kv_storage(ak), 0, ahost[last], h, mn, mx);
                for (int d = 0; d < hd; d++) {
                    float lo = k2[d], hi = k2[d];
                    for (int i = 1; i < valid; i++) {
                        lo = fminf(lo, k2[i * hd + d]);
                        hi = fmaxf(hi, k2[i * hd + d]);
                    }
                    if (lo != mn[d] || hi != mx[d])
                        bad_summ++;
                }
            }
            CHECK(bad_summ == 0, "arch %d: summary not rebuilt after truncation", arch);
            CHECK(okv_engine_seq_truncate(all, aseq, 10) == OKV_ERR_INVALID_ARG, "truncating past the window accepted");
        }
        okv_engine_seq_free(all, aseq);
        /* drafted rows verified and dropped every step: the first rows still equal dense */
        run_drafts(all, 32, sparse_logits, &rng);
        /* a 4-row forward multiplies in another order than a 1-row one: compare
         * within float rounding, and the greedy choice exactly */
        double worst = 0;
        int argmax_diff = 0;
        for (int i = 0; i < GEN; i++) {
            for (int j = 0; j < V; j++) {
                double d = fabs((double)dense_logits[i * V + j] - sparse_logits[i * V + j]);
                worst = d > worst ? d : worst;
            }
            argmax_diff += okv_argmax(dense_logits + i * V, V) != okv_argmax(sparse_logits + i * V, V);
        }
        CHECK(worst < 1e-4 && argmax_diff == 0, "arch %d mode %d: with drafted rows, max diff %.3g, %d argmax differ",
              arch, mode, worst, argmax_diff);
        CHECK(okv_kv_used_slots(okv_engine_kv(all)) == 0, "group slots leaked");
        CHECK(okv_kv_used_host_blocks(okv_engine_kv(all)) == 0, "host blocks leaked");
        struct okv_engine_stats end;
        okv_engine_stats_get(all, &end);
        CHECK(end.device_bytes == 0 && end.host_bytes == 0, "tiers in use after every sequence ended: %zu / %zu bytes",
              end.device_bytes, end.host_bytes);
        okv_engine_free(all);
    }

    /* a real budget: 40 tokens = 1 sink + 4 window + 5 selected blocks of 4 */
    for (int mode = 0; mode < 4; mode++) {
        okv_engine *sp = make(&sm.m, be, 40, 0, (enum okv_predict)mode, 32);
        run_drafts(sp, 32, sparse_logits, &rng);   /* rejected drafts around the window edge */
        CHECK(okv_kv_used_slots(okv_engine_kv(sp)) == 0, "group slots leaked after drafts");
        okv_engine_stats_reset(sp);
        run(sp, 32, sparse_logits, sparse_tok, NULL);
        struct okv_engine_stats st;
        okv_engine_stats_get(sp, &st);
        int same = 0;
        for (int i = 0; i < GEN; i++)
            same += sparse_tok[i] == dense_tok[i];
        printf("  arch %d mode %d budget 40/%d: %d/%d tokens as dense, fetched %lld units, in time %.3f, recall %.3f, "
               "device peak %zu B, stall %.2f ms\n",
               arch, mode, PROMPT + GEN, same, GEN, (long long)st.units_fetched,
               st.units_selected ? (double)st.units_in_time / st.units_selected : 1.0,
               st.recall_total ? (double)st.recall_hits / st.recall_total : 1.0, st.device_bytes_peak, st.stall_s * 1e3);
        CHECK(st.units_fetched > 0, "mode %d: nothing fetched", mode);
        CHECK(st.recall_hits <= st.recall_total, "recall above 1");
        /* host time: the sparse bookkeeping and the lists are parts of the issue time */
        CHECK(st.host_issue_s > 0 && st.host_sparse_s > 0 && st.host_lists_s > 0 && st.sync_wait_s >= 0,
              "mode %d: host times not measured (%g %g %g %g)", mode, st.host_issue_s, st.host_sparse_s, st.host_lists_s,
              st.sync_wait_s);
        CHECK(st.host_sparse_s + st.host_lists_s <= st.host_issue_s * 1.0001 + 1e-6, "mode %d: parts %g + %g exceed the issue time %g",
              mode, st.host_sparse_s, st.host_lists_s, st.host_issue_s);
        if (mode != OKV_PREDICT_ORACLE && mode != OKV_PREDICT_LAYER_AHEAD)
            CHECK(st.recall_total > 0, "mode %d: recall not measured", mode);
        okv_engine_free(sp);
    }
    /* the first decode step after the prompt selects with its own queries (unless
     * predict_from_prompt): its logits equal the oracle's, which always does */
    {
        static float orc[GEN * V], cur[GEN * V], fp[GEN * V];
        int32_t tk[GEN];
        float *outs[3] = {orc, cur, fp};
        for (int k = 0; k < 3; k++) {
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = k ? OKV_PREDICT_CURRENT : OKV_PREDICT_ORACLE,
                                           .predict_from_prompt = k == 2};
            okv_engine *pe = NULL;
            CHECK(okv_engine_create(&sm.m, be, &ep, &pe) == OKV_OK, "%s", okv_last_error());
            run(pe, 32, outs[k], tk, NULL);
            okv_engine_free(pe);
        }
        CHECK(!memcmp(orc, cur, sizeof(float) * 2 * V), "arch %d: the first decode step did not select inline", arch);
        printf("  arch %d: first decode step, prompt-predicted selection %s the inline one\n", arch,
               memcmp(orc + V, fp + V, sizeof(float) * V) ? "differs from" : "equals");
    }

    /* successor blocks (default 1): predictions add the block after their best ones; off
     * (-1) and on both keep every tier consistent, and the default does change what is fetched */
    {
        int64_t fetched[2];
        for (int k = 0; k < 2; k++) {
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = OKV_PREDICT_CURRENT, .successor_blocks = k ? 0 : -1};
            okv_engine *pe = NULL;
            CHECK(okv_engine_create(&sm.m, be, &ep, &pe) == OKV_OK, "%s", okv_last_error());
            run(pe, 32, sparse_logits, sparse_tok, NULL);
            struct okv_engine_stats es;
            okv_engine_stats_get(pe, &es);
            fetched[k] = es.units_fetched;
            CHECK(okv_kv_used_slots(okv_engine_kv(pe)) == 0 && es.device_bytes == 0 && es.host_bytes == 0,
                  "arch %d: tiers in use after the run (successors %s)", arch, k ? "on" : "off");
            okv_engine_free(pe);
        }
        CHECK(fetched[0] != fetched[1], "arch %d: successor blocks changed nothing (%lld units fetched)", arch,
              (long long)fetched[0]);
        printf("  arch %d: units fetched without successor blocks %lld, with %lld\n", arch, (long long)fetched[0],
               (long long)fetched[1]);
    }

    /* benchmark fill: 300 random positions, then decode; the device keeps only the
     * window, and the first step selects with its own queries */
    {
        okv_engine *fe = make(&sm.m, be, 40, 0, OKV_PREDICT_LOOKAHEAD, 32);
        int fs;
        CHECK(okv_engine_seq_create(fe, &fs) == OKV_OK, "%s", okv_last_error());
        CHECK(okv_engine_seq_fill_random(fe, fs, 300, 5) == OKV_OK, "fill: %s", okv_last_error());
        CHECK(okv_kv_used_slots(okv_engine_kv(fe)) <= 1 + 4 + 1, "fill holds %d group slots",
              okv_kv_used_slots(okv_engine_kv(fe)));
        int32_t tok = 3, sq = fs;
        uint8_t w = 1;
        for (int i = 0; i < 10; i++) {
            struct okv_batch b = {1, &tok, &sq, &w, NULL};
            CHECK(okv_engine_forward(fe, &b, sparse_logits) == OKV_OK, "decode after fill: %s", okv_last_error());
            tok = okv_argmax(sparse_logits, V);
        }
        struct okv_engine_stats fst;
        okv_engine_stats_get(fe, &fst);
        CHECK(fst.units_fetched > 0 && fst.units_selected > 0, "no selection after fill");
        CHECK(okv_engine_seq_len(fe, fs) == 310, "length %d after fill and 10 steps", okv_engine_seq_len(fe, fs));
        okv_engine_seq_free(fe, fs);
        okv_engine_free(fe);
    }

    /* streaming KV (drafters): full budget equals dense; a small one stays bounded */
    {
        struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 512,
                                       .streaming = true};
        okv_engine *se = NULL;
        CHECK(okv_engine_create(&sm.m, be, &ep, &se) == OKV_OK, "streaming: %s", okv_last_error());
        run(se, 32, sparse_logits, sparse_tok, NULL);
        CHECK(!memcmp(dense_logits, sparse_logits, sizeof dense_logits), "arch %d: streaming full budget differs", arch);
        okv_engine_free(se);
        ep.kv_budget = 40;
        CHECK(okv_engine_create(&sm.m, be, &ep, &se) == OKV_OK, "streaming: %s", okv_last_error());
        int sseq;
        run(se, 32, sparse_logits, sparse_tok, &sseq);
        int used = okv_kv_used_slots(okv_engine_kv(se));
        CHECK(used <= 40 / 4 + 1, "streaming holds %d blocks for a 40-token budget", used);
        okv_engine_seq_free(se, sseq);
        CHECK(okv_kv_used_slots(okv_engine_kv(se)) == 0, "streaming slots leaked");
        okv_engine_free(se);
    }
    /* residency held by the backend (select_install, placeholders in the lists) against
     * residency on the host: the same selections, merges and successors, so the same
     * logits bit for bit and the same fetches; plain decode, drafted rows (lookahead), and
     * plain decode with sticky selection (which must fetch less than without) */
    int64_t fetched_plain = 0;
    for (int mode = 0; mode < 3; mode++) {
        const int drafts = mode == 1;
        const float sticky = mode == 2 ? 0.5f : 0.0f;
        static float lg[2][GEN * V];
        int64_t fetched[2];
        bool placed[2];
        for (int host = 0; host < 2; host++) {
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = OKV_PREDICT_LOOKAHEAD, .host_residency = host == 1,
                                           .cache_factor = 1.5f, .sticky = sticky};
            okv_engine *re = NULL;
            CHECK(okv_engine_create(&sm.m, be, &ep, &re) == OKV_OK, "residency engine: %s", okv_last_error());
            if (!re)
                continue;
            struct okv_rng dr;
            okv_rng_seed(&dr, 77);
            if (drafts)
                run_drafts(re, 32, lg[host], &dr);
            else
                run(re, 32, lg[host], sparse_tok, NULL);
            struct okv_engine_stats rs;
            okv_engine_stats_get(re, &rs);
            fetched[host] = rs.units_fetched;
            placed[host] = rs.device_residency;
            okv_engine_free(re);
        }
        CHECK(placed[0] && !placed[1], "arch %d: residency not placed as asked", arch);
        CHECK(!memcmp(lg[0], lg[1], sizeof lg[0]), "arch %d mode %d: backend residency changes the logits", arch, mode);
        CHECK(fetched[0] == fetched[1] && fetched[0] > 0, "arch %d mode %d: %lld units fetched vs %lld on the host", arch,
              mode, (long long)fetched[0], (long long)fetched[1]);
        printf("  arch %d: backend vs host residency%s: logits equal, %lld units fetched each\n", arch,
               drafts ? " (drafted rows)" : sticky > 0 ? " (sticky 0.5)" : "", (long long)fetched[0]);
        if (mode == 0)
            fetched_plain = fetched[0];
        if (mode == 2)
            CHECK(fetched[0] < fetched_plain, "arch %d: sticky selection fetched %lld units, %lld without", arch,
                  (long long)fetched[0], (long long)fetched_plain);
    }
    {   /* the rows' rank merge (okv_engine_params.merge, --kv-merge rank; ACCURACY.md): each drafted
         * row ranks the candidates alone and the rows' best are taken in turn. With a budget that
         * holds every block it gives the half merge's logits; with a tight one it runs, fetches and
         * selects differently from the half merge (v = 2),
         * and the backend's residency (select_install, okv_resid_item.by_rank: v = 3) gives the host
         * residency's logits and fetches bit for bit (v = 4). OKV_LOOKAHEAD_MERGE overrides the
         * parameter both ways (v = 1 by the environment, v = 3 by the parameter). Verify steps that
         * select with their own rows (verify_inline) merge by rank by default: v = 5 (auto) equals
         * v = 6 (rank) and differs from v = 7 (share) */
        static float lr[8][GEN * V];
        int64_t fetched[8] = {0};
        bool placed[8] = {false};
        for (int v = 0; v < 8; v++) {
            if (v == 1)
                setenv("OKV_LOOKAHEAD_MERGE", "rank", 1);
            static const enum okv_merge rule[8] = {OKV_MERGE_AUTO, OKV_MERGE_AUTO, OKV_MERGE_SHARE, OKV_MERGE_RANK,
                                                   OKV_MERGE_RANK, OKV_MERGE_AUTO, OKV_MERGE_RANK, OKV_MERGE_SHARE};
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32,
                                           .kv_budget = v < 2 ? 512 : 40, .predict = OKV_PREDICT_LOOKAHEAD,
                                           .merge = rule[v], .host_residency = v == 4, .verify_inline = v >= 5};
            okv_engine *re = NULL;
            CHECK(okv_engine_create(&sm.m, be, &ep, &re) == OKV_OK, "rank merge engine: %s", okv_last_error());
            unsetenv("OKV_LOOKAHEAD_MERGE");
            if (!re)
                continue;
            struct okv_rng dr;
            okv_rng_seed(&dr, 77);
            run_drafts(re, 32, lr[v], &dr);
            struct okv_engine_stats rs;
            okv_engine_stats_get(re, &rs);
            fetched[v] = rs.units_fetched;
            placed[v] = rs.device_residency;
            okv_engine_free(re);
        }
        float worst = 0;
        for (int i = 0; i < GEN * V; i++)
            worst = fmaxf(worst, fabsf(lr[0][i] - lr[1][i]));
        CHECK(worst < 1e-4f, "arch %d: rank merge with every block selected differs from the half merge by %g", arch, worst);
        CHECK(placed[0] && placed[1] && placed[2] && placed[3] && !placed[4] && placed[5], "arch %d: residency not placed "
              "as asked", arch);
        CHECK(fetched[3] > 0 && memcmp(lr[2], lr[3], sizeof lr[2]), "arch %d: the tight rank merge fetched %lld units, "
              "logits %s the half merge's", arch, (long long)fetched[3], memcmp(lr[2], lr[3], sizeof lr[2]) ? "unlike" : "equal to");
        CHECK(!memcmp(lr[3], lr[4], sizeof lr[3]) && fetched[3] == fetched[4], "arch %d: rank merge: the backend's residency "
              "differs from the host's (%lld vs %lld units fetched, logits %s)", arch, (long long)fetched[3],
              (long long)fetched[4], memcmp(lr[3], lr[4], sizeof lr[3]) ? "differ" : "equal");
        CHECK(!memcmp(lr[5], lr[6], sizeof lr[5]) && memcmp(lr[5], lr[7], sizeof lr[5]), "arch %d: verify_inline's default "
              "merge is not the rank merge", arch);
        printf("  arch %d: rank merge: every block = the half merge (max diff %g); budget 40: %lld units fetched (half: %lld), "
               "backend residency = host residency; verify_inline: auto = rank != share\n", arch, worst,
               (long long)fetched[3], (long long)fetched[2]);
        /* the environment's "share" overrides the parameter's rank: the half merge's logits */
        setenv("OKV_LOOKAHEAD_MERGE", "share", 1);
        struct okv_engine_params sp = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                       .predict = OKV_PREDICT_LOOKAHEAD, .merge = OKV_MERGE_RANK};
        okv_engine *se = NULL;
        CHECK(okv_engine_create(&sm.m, be, &sp, &se) == OKV_OK, "rank merge engine: %s", okv_last_error());
        unsetenv("OKV_LOOKAHEAD_MERGE");
        if (se) {
            static float ls[GEN * V];
            struct okv_rng dr;
            okv_rng_seed(&dr, 77);
            run_drafts(se, 32, ls, &dr);
            CHECK(!memcmp(ls, lr[2], sizeof ls), "arch %d: OKV_LOOKAHEAD_MERGE=share did not override the rank merge", arch);
            okv_engine_free(se);
        }
    }
    {   /* a merge rule outside the enum is refused */
        struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                       .merge = (enum okv_merge)7};
        okv_engine *bad = NULL;
        CHECK(okv_engine_create(&sm.m, be, &ep, &bad) == OKV_ERR_INVALID_ARG && strstr(okv_last_error(), "merge rule 7"),
              "merge 7: %s", okv_last_error());
    }
    {   /* a share beyond 0.5 is refused */
        struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40, .sticky = 0.7f};
        okv_engine *bad = NULL;
        CHECK(okv_engine_create(&sm.m, be, &ep, &bad) == OKV_ERR_INVALID_ARG && strstr(okv_last_error(), "sticky"),
              "sticky 0.7: %s", okv_last_error());
    }

    okv_engine_seq_free(dense, dseq);
    okv_engine_free(dense);

    /* too small a budget is a clear error */
    struct okv_engine_params ep = {.block_size = 16, .kv_budget = 64};
    okv_engine *bad = NULL;
    CHECK(okv_engine_create(&sm.m, be, &ep, &bad) == OKV_ERR_INVALID_ARG && strstr(okv_last_error(), "budget"),
          "small budget: %s", okv_last_error());
    /* layer-ahead (evaluation): layer l selects with its queries estimated from layer l-1's input
     * (layer 0 with its own). With layer 0's output projections zeroed, layer 1's input equals
     * layer 0's, so the estimate is exact and a run at a real budget equals the oracle's bit for bit;
     * with the weights as they are it selects differently (main checks that some architecture does) */
    {
        struct synth_model z;
        synth_model_init(&z, arch, 100 + arch);   /* sm's weights */
        static float lg[2][2][GEN * V], lgp[GEN * V];
        int32_t tk[GEN];
        long long fetched_la = 0;   /* layer-ahead alone, the weights as they are */
        for (int zero = 0; zero < 2; zero++) {
            if (zero) {
                memset((void *)z.m.layers[0].wo.data, 0, z.m.layers[0].wo.nbytes);
                memset((void *)z.m.layers[0].w_down.data, 0, z.m.layers[0].w_down.nbytes);
            }
            for (int k = 0; k < 2; k++) {
                okv_engine *le = make(&z.m, be, 40, 0, k ? OKV_PREDICT_LAYER_AHEAD : OKV_PREDICT_ORACLE, 32);
                run(le, 32, lg[zero][k], tk, NULL);
                struct okv_engine_stats ls;
                okv_engine_stats_get(le, &ls);
                CHECK(ls.inline_selections > 0 && ls.units_fetched > 0, "arch %d: layer-ahead run selected nothing", arch);
                /* chosen a layer early, its fetches are charged to the in-time share (the oracle's are not) */
                if (k)
                    CHECK(ls.units_selected > 0 && ls.units_in_time <= ls.units_selected, "arch %d: layer-ahead in-time %lld / %lld",
                          arch, (long long)ls.units_in_time, (long long)ls.units_selected);
                if (k && !zero)
                    fetched_la = ls.units_fetched;
                okv_engine_free(le);
            }
            if (zero)
                continue;
            /* with the step-ahead prefetch (OKV_LA_PREFETCH=1) the attention reads the same selection:
             * the same logits bit for bit; the prefetch only changes what is resident, so the traffic */
            setenv("OKV_LA_PREFETCH", "1", 1);
            okv_engine *pe = make(&z.m, be, 40, 0, OKV_PREDICT_LAYER_AHEAD, 32);
            unsetenv("OKV_LA_PREFETCH");
            run(pe, 32, lgp, tk, NULL);
            struct okv_engine_stats ps;
            okv_engine_stats_get(pe, &ps);
            okv_engine_free(pe);
            CHECK(!memcmp(lg[0][1], lgp, sizeof lgp), "arch %d: layer-ahead's step-ahead prefetch changes the logits", arch);
            CHECK(ps.units_fetched != fetched_la, "arch %d: the step-ahead prefetch fetched what layer-ahead alone does (%lld units)",
                  arch, fetched_la);
            printf("  arch %d: layer-ahead with the step-ahead prefetch: same logits, %lld units fetched (%lld without)\n", arch,
                   (long long)ps.units_fetched, fetched_la);
            /* with a sticky share (the default where okv_engine_params.sticky > 0) it keeps resident blocks
             * among its lower-ranked quarter: with the serve default of two units a selected block, fewer
             * fetches than without */
            long long fetched_st[2] = {0, 0};
            for (int sticky = 0; sticky < 2; sticky++) {
                struct okv_engine_params sp = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                               .predict = OKV_PREDICT_LAYER_AHEAD, .cache_factor = 2,
                                               .sticky = sticky ? 0.25f : 0.0f};
                okv_engine *se = NULL;
                CHECK(okv_engine_create(&z.m, be, &sp, &se) == OKV_OK, "layer-ahead engine: %s", okv_last_error());
                if (!se)
                    continue;
                run(se, 32, lgp, tk, NULL);
                struct okv_engine_stats ss;
                okv_engine_stats_get(se, &ss);
                okv_engine_free(se);
                fetched_st[sticky] = ss.units_fetched;
            }
            CHECK(fetched_st[1] < fetched_st[0], "arch %d: sticky layer-ahead fetched %lld units, %lld without", arch,
                  fetched_st[1], fetched_st[0]);
            printf("  arch %d: layer-ahead, cache factor 2: %lld units fetched sticky, %lld not\n", arch, fetched_st[1],
                   fetched_st[0]);
        }
        CHECK(!memcmp(lg[1][0], lg[1][1], sizeof lg[1][0]), "arch %d: layer-ahead with an exact estimate differs from the oracle",
              arch);
        const bool differs = memcmp(lg[0][0], lg[0][1], sizeof lg[0][0]) != 0;
        la_differs += differs;
        printf("  arch %d: layer-ahead equals the oracle with an exact estimate; with the model's weights it %s\n", arch,
               differs ? "differs" : "equals it too");
        synth_model_free(&z);
    }
    /* layer-ahead after attention (ahead_after_attention): layer 1's queries estimated from layer 0's
     * input with its attention output added. With layer 0's MLP output zeroed alone, that is layer 1's
     * input, so the run equals the oracle's bit for bit, while the estimate at layer 0's start (which
     * misses the attention output, kept here) does not have to */
    {
        struct synth_model z;
        synth_model_init(&z, arch, 100 + arch);
        memset((void *)z.m.layers[0].w_down.data, 0, z.m.layers[0].w_down.nbytes);
        static float lm[4][GEN * V];
        int32_t tk[GEN];
        long long fetched_mid[4] = {0};
        /* k = 3: after attention with the early fetch (OKV_LA_EARLY=1: layer 1's blocks also chosen at
         * layer 0's start and fetched, then chosen again after its attention); without a sticky share
         * the second choice does not look at residency, so the logits are the same bit for bit and
         * only the traffic grows by what the first choice fetched in vain */
        for (int k = 0; k < 4; k++) {
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = k ? OKV_PREDICT_LAYER_AHEAD : OKV_PREDICT_ORACLE,
                                           .ahead_after_attention = k >= 2, .track_recall = true};
            okv_engine *le = NULL;
            if (k == 3)
                setenv("OKV_LA_EARLY", "1", 1);
            CHECK(okv_engine_create(&z.m, be, &ep, &le) == OKV_OK, "layer-ahead engine: %s", okv_last_error());
            unsetenv("OKV_LA_EARLY");
            if (!le)
                continue;
            run(le, 32, lm[k], tk, NULL);
            struct okv_engine_stats ls;
            okv_engine_stats_get(le, &ls);
            fetched_mid[k] = ls.units_fetched;
            CHECK(ls.inline_selections > 0 && ls.units_fetched > 0, "arch %d: layer-ahead (%d) selected nothing", arch, k);
            /* recall of layer-ahead's estimate (layer 1's set against its own queries' set): all of it when
             * the estimate is exact; the oracle has nothing to measure */
            CHECK(k ? ls.recall_total > 0 && ls.recall_hits <= ls.recall_total : ls.recall_total == 0,
                  "arch %d: layer-ahead (%d) recall %lld / %lld", arch, k, (long long)ls.recall_hits, (long long)ls.recall_total);
            if (k >= 2)
                CHECK(ls.recall_hits == ls.recall_total, "arch %d: an exact estimate's recall %lld / %lld", arch,
                      (long long)ls.recall_hits, (long long)ls.recall_total);
            if (k == 1)
                printf("  arch %d: layer-ahead at the layer's start, layer 0's MLP zeroed: recall %.3f\n", arch,
                       ls.recall_total ? (double)ls.recall_hits / (double)ls.recall_total : 0.0);
            okv_engine_free(le);
        }
        CHECK(!memcmp(lm[0], lm[2], sizeof lm[0]), "arch %d: layer-ahead after attention differs from the oracle with "
              "the MLP output zeroed", arch);
        CHECK(!memcmp(lm[2], lm[3], sizeof lm[2]), "arch %d: the early fetch changes layer-ahead-attn's logits", arch);
        CHECK(fetched_mid[3] > fetched_mid[2], "arch %d: the early fetch fetched %lld units, %lld without", arch, fetched_mid[3],
              fetched_mid[2]);
        printf("  arch %d: layer-ahead after attention with the early fetch: same logits, %lld units fetched (%lld without)\n",
               arch, fetched_mid[3], fetched_mid[2]);
        const bool start_differs = memcmp(lm[0], lm[1], sizeof lm[0]) != 0;
        la_start_differs += start_differs;
        printf("  arch %d: layer-ahead after attention equals the oracle with layer 0's MLP zeroed; at the layer's start "
               "it %s\n", arch, start_differs ? "differs" : "equals it too");
        synth_model_free(&z);
    }
    synth_model_free(&sm);
}

/* The selection diagnostics of the CPU backend (OKV_SELECT_SCORE, cpu_select.c): for each
 * mode the scores select_blocks returns equal the score recomputed here from the summaries
 * or the host tier's keys, and the ids are the top k of those scores. */
static void test_score_diagnostics(okv_backend *be)
{
    enum { NB = 12, BS = 4, HD = 8, NH = 2, NKV = 1, K = 3 };
    struct okv_kv_geometry g = {.n_layers = 1, .n_group_slots = 2, .n_sparse_units = 4, .n_host_blocks = NB,
                                .block_size = BS, .n_kv_heads = NKV, .head_dim = HD};
    okv_bkv *kv = NULL;
    CHECK(be->ops->kv_alloc(be, &g, &kv) == OKV_OK, "kv_alloc: %s", okv_last_error());
    if (!kv)
        return;
    for (int b = 0; b < NB; b++)   /* blocks of different spreads */
        CHECK(be->ops->kv_host_randomize(be, kv, b, 100 + (uint64_t)b, 0.2f + 0.15f * (float)(b % 5)) == OKV_OK,
              "randomize: %s", okv_last_error());
    float qh[NH * HD];
    for (int i = 0; i < NH * HD; i++)
        qh[i] = (float)((i * 7 + 3) % 11) / 5.0f - 1.0f;
    okv_bmem *q = NULL;
    CHECK(be->ops->mem_alloc(be, NH * HD, &q) == OKV_OK && be->ops->mem_write(be, q, 0, qh, NH * HD) == OKV_OK, "q");
    int32_t rows[1] = {0}, cand[NB], bound_ids[K];
    for (int b = 0; b < NB; b++)
        cand[b] = NB - 1 - b;
    const char *modes[] = {NULL, "blend:1", "blend:0.5", "exact", "mean", "codes4", "codes1"};
    bool exact_differs = false;
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        const char *mode = modes[mi];
        if (mode)
            setenv("OKV_SELECT_SCORE", mode, 1);
        else
            unsetenv("OKV_SELECT_SCORE");
        int32_t ids[NKV * K];
        float sc[NKV * NB];
        struct okv_select_req req = {rows, 1, cand, NB, K};
        CHECK(be->ops->select_blocks(be, kv, 0, q, NH, &req, 1, ids, sc) == OKV_OK, "select: %s", okv_last_error());
        for (int c = 0; c < NB; c++) {
            float mn[HD], mx[HD], kk[BS * HD], vv[BS * HD], want = -INFINITY, tol = 1e-5f;
            be->ops->kv_summary_read(be, kv, 0, cand[c], 0, mn, mx);
            be->ops->kv_host_read(be, kv, 0, cand[c], 0, kk, vv);
            for (int h = 0; h < NH; h++) {   /* both query heads of the group */
                const float *qv = qh + h * HD;
                float bound = 0, centre = 0, slack = 0, ex = -INFINITY, mean = 0, q1 = 0;
                for (int d = 0; d < HD; d++) {
                    bound += fmaxf(qv[d] * mn[d], qv[d] * mx[d]);
                    centre += qv[d] * 0.5f * (mn[d] + mx[d]);
                    slack += fabsf(qv[d]) * 0.5f * (mx[d] - mn[d]);
                    q1 += fabsf(qv[d]) * (mx[d] - mn[d]);
                }
                for (int t = 0; t < BS; t++) {
                    float dot = 0;
                    for (int d = 0; d < HD; d++)
                        dot += qv[d] * kk[t * HD + d];
                    ex = fmaxf(ex, dot);
                    mean += dot / BS;
                }
                float s = bound;
                if (mode && !strcmp(mode, "blend:1"))
                    s = centre + slack;
                else if (mode && !strcmp(mode, "blend:0.5"))
                    s = centre + 0.5f * slack;
                else if (mode && !strcmp(mode, "exact"))
                    s = ex;
                else if (mode && !strcmp(mode, "mean"))
                    s = mean;
                else if (mode && !strncmp(mode, "codes", 5)) {
                    /* rounding each channel to 2^B levels moves q.k by at most half a level per channel */
                    s = ex;
                    tol = q1 / (2.0f * (float)((1 << atoi(mode + 5)) - 1)) + 1e-5f;
                }
                want = fmaxf(want, s);
            }
            CHECK(fabsf(sc[c] - want) <= tol * (1 + fabsf(want)), "%s block %d: score %g, want %g (tolerance %g)",
                  mode ? mode : "bound", cand[c], sc[c], want, tol);
        }
        for (int i = 0; i < K; i++) {   /* the top k of the scores, best first */
            int better = 0;
            float si = 0;
            for (int c = 0; c < NB; c++)
                if (cand[c] == ids[i])
                    si = sc[c];
            for (int c = 0; c < NB; c++)
                better += sc[c] > si;
            CHECK(better == i, "%s: id %d at rank %d has %d better scores", mode ? mode : "bound", ids[i], i, better);
        }
        if (!mode)
            memcpy(bound_ids, ids, sizeof ids);
        if (mode && !strcmp(mode, "exact"))
            exact_differs = memcmp(bound_ids, ids, sizeof ids) != 0;
    }
    unsetenv("OKV_SELECT_SCORE");
    /* the bound favours the blocks of wide spread; the exact max does not */
    CHECK(exact_differs, "the exact score chose the bound's blocks on blocks of different spreads");
    be->ops->mem_free(be, q);
    be->ops->kv_free(be, kv);
}

int main(void)
{
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 2};
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    test_arch(OKV_ARCH_LLAMA, be);
    test_arch(OKV_ARCH_QWEN2, be);
    test_arch(OKV_ARCH_QWEN3, be);
    /* an estimate that always equals the true queries would be the oracle under another name */
    CHECK(la_differs > 0, "layer-ahead equals the oracle on every architecture: the estimate is not used");
    CHECK(la_start_differs > 0, "layer-ahead at a layer's start equals the oracle on every architecture with the MLP zeroed: "
          "the test does not tell the two estimates apart");
    test_score_diagnostics(be);
    okv_backend_free(be);
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_sparse");
}
