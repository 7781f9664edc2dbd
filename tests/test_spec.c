/* label: unit */
/* Speculative decoding on synthetic models (CPU backend):
 *  - greedy: for every drafter (ngram, a second model, self) and several draft
 *    lengths, the tokens equal plain greedy decoding, on a dense engine and on a
 *    sparse one with a full budget; with a real sparse budget it runs;
 *  - max_tokens and a callback that stops apply to accepted tokens one by one;
 *  - sampling: the joint distribution of the first three tokens over many seeds
 *    matches the target's exact one (chained okv_sampling_probs), chi-square, also
 *    with the adaptive draft length;
 *  - verify_inline: verify steps select with their own queries (counted), sparse and at a full budget;
 *  - verify_defer: stale own tokens are deferred on a sparse budget, never at a full one or inline; the
 *    scheduler (what serve runs) defers the same steps as okv_generate: the same greedy tokens with
 *    n-gram drafts on a sparse budget, with and without the switch;
 *  - adaptive draft length (okv_spec_len): the acceptance estimate, the cost line and the chosen length
 *    against hand-computed values; in okv_generate and the scheduler the greedy tokens stay plain
 *    greedy's, a perfect drafter drafts near the most a step and a useless one near one;
 *  - statistics are consistent; rollback leaks no KV slot in either engine; no
 *    allocation is left at the end; bad drafter names and vocabularies fail clearly. */
#include <math.h>

#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/generate.h"
#include "oasiskv/sched.h"
#include "oasiskv/spec.h"
#include "synth_model.h"
#include "testutil.h"

#define V 200
#define PROMPT 150
#define GEN 40

static int32_t prompt[PROMPT];

static okv_engine *make_engine(struct okv_model *m, okv_backend *be, int budget, enum okv_predict pred)
{
    struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 64, .kv_budget = budget,
                                   .predict = pred};
    okv_engine *e = NULL;
    enum okv_status st = okv_engine_create(m, be, &ep, &e);
    CHECK(st == OKV_OK, "engine (budget %d): %s", budget, okv_last_error());
    return e;
}

static okv_drafter *make_model_drafter(const struct okv_model *m, okv_backend *be, int budget)
{
    struct okv_drafter_params dp = {.kv_budget = budget, .block_size = 4, .max_ctx = 512, .max_batch_tokens = 32};
    okv_drafter *d = NULL;
    enum okv_status st = okv_drafter_model_create(m, V, be, &dp, &d);
    CHECK(st == OKV_OK, "model drafter: %s", okv_last_error());
    return d;
}

struct stop_after {
    int n, seen;
};

static bool stop_cb(void *user, int32_t token, const char *text, size_t len)
{
    struct stop_after *s = user;
    if (token < 0)
        return true;
    return ++s->seen < s->n;
}

static enum okv_status gen(okv_engine *e, okv_drafter *d, int K, const int32_t *pr, int n, struct okv_sampling s,
                           int max_tokens, struct okv_gen_result *res, struct stop_after *stop)
{
    struct okv_gen_params gp = {.max_tokens = max_tokens, .sampling = s, .drafter = d, .spec_tokens = K};
    enum okv_status st = okv_generate(e, NULL, pr, n, &gp, stop ? stop_cb : NULL, stop, res);
    CHECK(st == OKV_OK, "generate (%s, K %d): %s", d ? okv_drafter_name(d) : "plain", K, okv_last_error());
    return st;
}

static void check_stats(const struct okv_spec_stats *s, const char *what)
{
    CHECK(s->accepted_tokens <= s->draft_tokens && s->drafts <= s->draft_tokens, "%s: counters %lld/%lld/%lld", what,
          (long long)s->drafts, (long long)s->draft_tokens, (long long)s->accepted_tokens);
    CHECK(s->mean_acceptance_length >= 1.0, "%s: mean acceptance length %g", what, s->mean_acceptance_length);
    CHECK(s->acceptance_rate >= 0.0 && s->acceptance_rate <= 1.0, "%s: acceptance rate %g", what, s->acceptance_rate);
    if (s->draft_tokens > 0)
        CHECK(s->acceptance_rate == (double)s->accepted_tokens / s->draft_tokens, "%s: rate", what);
    int64_t prop = 0, acc = 0;
    for (int i = 0; i < OKV_SPEC_MAX_TOKENS; i++) {
        prop += s->pos_proposed[i];
        acc += s->pos_accepted[i];
        CHECK(s->pos_accepted[i] <= s->pos_proposed[i], "%s: position %d accepted above proposed", what, i);
        if (i > 0)
            CHECK(s->pos_accepted[i] <= s->pos_accepted[i - 1] && s->pos_proposed[i] <= s->pos_proposed[i - 1],
                  "%s: position %d counts exceed position %d's", what, i, i - 1);
    }
    CHECK(prop == s->draft_tokens && acc == s->accepted_tokens, "%s: per-position sums %lld/%lld", what, (long long)prop,
          (long long)acc);
    CHECK(s->pos_proposed[0] == s->drafts, "%s: steps with drafts %lld vs position 0 %lld", what, (long long)s->drafts,
          (long long)s->pos_proposed[0]);
}

static void check_no_slots(okv_engine *e, okv_drafter *d, const char *what)
{
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0, "%s: target slots leaked (%d)", what, okv_kv_used_slots(okv_engine_kv(e)));
    CHECK(okv_kv_used_host_blocks(okv_engine_kv(e)) == 0, "%s: target host blocks leaked", what);
    okv_engine *de = okv_drafter_engine(d);
    if (de)
        CHECK(okv_kv_used_slots(okv_engine_kv(de)) == 0, "%s: drafter slots leaked (%d)", what,
              okv_kv_used_slots(okv_engine_kv(de)));
}

static void test_greedy(enum okv_arch arch, okv_backend *be)
{
    struct synth_model tm, dm;
    synth_model_init(&tm, arch, 100 + arch);
    synth_model_init(&dm, arch, 700 + arch);   /* same vocabulary, other weights */
    struct okv_rng rng;
    okv_rng_seed(&rng, 31 + arch);
    for (int i = 0; i < PROMPT; i++)
        prompt[i] = (int32_t)(okv_rng_next(&rng) % V);
    memcpy(prompt + 110, prompt + 30, sizeof(int32_t) * 40);   /* something for prompt lookup to find */

    okv_drafter *drafters[5];
    const char *names[5] = {"ngram", "model", "model/bounded", "self", "self/bounded"};
    CHECK(okv_drafter_create("ngram", &tm.m, be, NULL, &drafters[0]) == OKV_OK, "ngram: %s", okv_last_error());
    drafters[1] = make_model_drafter(&dm.m, be, 512);
    drafters[2] = make_model_drafter(&dm.m, be, 40);
    drafters[3] = make_model_drafter(&tm.m, be, 512);
    drafters[4] = make_model_drafter(&tm.m, be, 40);

    const struct okv_sampling greedy = {0};
    const struct { int budget; enum okv_predict pred; bool exact; const char *name; } cfgs[] = {
        {0, OKV_PREDICT_CURRENT, true, "dense"},
        {512, OKV_PREDICT_LOOKAHEAD, true, "sparse full budget"},
        {40, OKV_PREDICT_LOOKAHEAD, false, "sparse budget 40"},
    };
    const int Ks[] = {1, 3, 4, 8};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        okv_engine *e = make_engine(&tm.m, be, cfgs[c].budget, cfgs[c].pred);
        struct okv_gen_result plain;
        gen(e, NULL, 0, prompt, PROMPT, greedy, GEN, &plain, NULL);
        CHECK(plain.n_tokens == GEN && plain.spec.drafts == 0, "plain: %d tokens", plain.n_tokens);
        for (int di = 0; di < 5; di++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
                struct okv_gen_result r;
                if (gen(e, drafters[di], Ks[ki], prompt, PROMPT, greedy, GEN, &r, NULL) != OKV_OK)
                    continue;
                char what[128];
                snprintf(what, sizeof what, "arch %d %s, %s K %d", arch, cfgs[c].name, names[di], Ks[ki]);
                check_stats(&r.spec, what);
                check_no_slots(e, drafters[di], what);
                CHECK(r.n_tokens == GEN && !strcmp(r.finish_reason, "length"), "%s: %d tokens, %s", what, r.n_tokens,
                      r.finish_reason);
                if (cfgs[c].exact)
                    CHECK(r.n_tokens == plain.n_tokens && !memcmp(r.tokens, plain.tokens, sizeof(int32_t) * (size_t)GEN),
                          "%s: tokens differ from plain greedy", what);
                if (ki == 2 && c != 2)
                    printf("  %-40s drafts %3lld, draft tokens %3lld, accepted %3lld, rate %.3f, mean length %.2f\n", what,
                           (long long)r.spec.drafts, (long long)r.spec.draft_tokens, (long long)r.spec.accepted_tokens,
                           r.spec.acceptance_rate, r.spec.mean_acceptance_length);
                /* the target itself with the whole context: every draft is the target's own choice */
                if (di == 3 && cfgs[c].exact)
                    CHECK(r.spec.acceptance_rate > 0.95, "%s: self drafting with a full window accepts only %.3f", what,
                          r.spec.acceptance_rate);
                okv_gen_result_free(&r);
            }

        /* max_tokens and a stopping callback cut inside a step: one token at a time */
        if (cfgs[c].exact)
            for (int di = 0; di < 5; di += 3)
                for (int mt = 1; mt <= 12; mt++) {
                    struct okv_gen_result r;
                    if (gen(e, drafters[di], 4, prompt, PROMPT, greedy, mt, &r, NULL) != OKV_OK)
                        continue;
                    CHECK(r.n_tokens == mt && !memcmp(r.tokens, plain.tokens, sizeof(int32_t) * (size_t)mt),
                          "arch %d %s max_tokens %d: %d tokens or different ones", arch, names[di], mt, r.n_tokens);
                    /* each step emits its accepted drafts and one token of the target's */
                    CHECK(r.spec.accepted_tokens + r.spec.drafts <= mt - 1, "max_tokens %d: %lld steps, %lld accepted", mt,
                          (long long)r.spec.drafts, (long long)r.spec.accepted_tokens);
                    okv_gen_result_free(&r);
                    struct stop_after sa = {mt, 0};
                    if (gen(e, drafters[di], 4, prompt, PROMPT, greedy, GEN, &r, &sa) != OKV_OK)
                        continue;
                    CHECK(r.n_tokens == mt && sa.seen == mt && !strcmp(r.finish_reason, "stop") &&
                              !memcmp(r.tokens, plain.tokens, sizeof(int32_t) * (size_t)mt),
                          "arch %d %s: callback stop after %d: %d tokens", arch, names[di], mt, r.n_tokens);
                    okv_gen_result_free(&r);
                    check_no_slots(e, drafters[di], "stops");
                }
        okv_gen_result_free(&plain);
        okv_engine_free(e);
    }

    /* verify_inline: a verify step selects with its own rows' queries instead of the set its previous
     * step predicted. Off, only each generation's first decode step selects inline; on, every step
     * that verifies drafts does too, and the run still decodes, releases every slot, and at a full
     * budget equals plain greedy */
    /* verify_defer (vi == 2): a greedy verify step whose drafted rows read the predicted set drops its own
     * token; at a full budget nothing is predicted and nothing deferred (tokens = plain greedy), on a
     * sparse budget steps are deferred and the run still makes every token and releases every slot;
     * with both switches on, inline selection leaves nothing stale to defer (vi == 3) */
    for (int vi = 0; vi < 4; vi++)
        for (int full = 0; full < 2; full++) {
            struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 64,
                                           .kv_budget = full ? 512 : 40, .predict = OKV_PREDICT_LOOKAHEAD,
                                           .verify_inline = vi == 1 || vi == 3, .verify_defer = vi >= 2};
            okv_engine *e = NULL;
            CHECK(okv_engine_create(&tm.m, be, &ep, &e) == OKV_OK, "engine: %s", okv_last_error());
            if (!e)
                continue;
            struct okv_gen_result plain = {0}, r = {0};
            if (full)
                gen(e, NULL, 0, prompt, PROMPT, greedy, GEN, &plain, NULL);
            okv_engine_stats_reset(e);
            if (gen(e, drafters[1], 3, prompt, PROMPT, greedy, GEN, &r, NULL) == OKV_OK) {
                struct okv_engine_stats st;
                okv_engine_stats_get(e, &st);
                char what[96];
                snprintf(what, sizeof what, "arch %d verify_inline %d verify_defer %d, budget %d", arch, ep.verify_inline,
                         ep.verify_defer, ep.kv_budget);
                check_stats(&r.spec, what);
                check_no_slots(e, drafters[1], what);
                CHECK(r.n_tokens == GEN && r.spec.drafts > 0, "%s: %d tokens, %lld steps with drafts", what, r.n_tokens,
                      (long long)r.spec.drafts);
                if (full)   /* the budget covers the context: dense, no selection at all */
                    CHECK(st.inline_selections == 0 && !memcmp(r.tokens, plain.tokens, sizeof(int32_t) * (size_t)GEN),
                          "%s: %lld inline selections, tokens %s plain greedy's", what, (long long)st.inline_selections,
                          memcmp(r.tokens, plain.tokens, sizeof(int32_t) * (size_t)GEN) ? "differ from" : "equal");
                else if (ep.verify_inline)
                    CHECK(st.inline_selections >= r.spec.drafts, "%s: %lld inline selections for %lld verify steps", what,
                          (long long)st.inline_selections, (long long)r.spec.drafts);
                else
                    CHECK(st.inline_selections == 1, "%s: %lld inline selections (the first decode step's alone expected)",
                          what, (long long)st.inline_selections);
                if (!full && vi == 2)
                    CHECK(r.spec.deferred > 0 && r.spec.deferred <= r.spec.drafts &&
                              r.spec.mean_acceptance_length ==
                                  1.0 + (double)(r.spec.accepted_tokens - r.spec.deferred) / (double)r.spec.drafts,
                          "%s: %lld of %lld verify steps deferred, %g tokens a step", what, (long long)r.spec.deferred,
                          (long long)r.spec.drafts, r.spec.mean_acceptance_length);
                else
                    CHECK(r.spec.deferred == 0, "%s: %lld steps deferred (none expected)", what, (long long)r.spec.deferred);
                okv_gen_result_free(&r);
            }
            if (full)
                okv_gen_result_free(&plain);
            okv_engine_free(e);
        }
    for (int di = 0; di < 5; di++)
        okv_drafter_free(drafters[di]);
    synth_model_free(&tm);
    synth_model_free(&dm);
}

/* ---- the scheduler's verification against okv_generate's ---- */

struct sched_out {
    int32_t toks[GEN + 8];
    int n;
    bool done;
};

static void so_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)text;
    (void)len;
    struct sched_out *o = user;
    if (o->n < GEN + 8)
        o->toks[o->n] = token;
    o->n++;
}

static void so_finish(void *user, const struct okv_sched_result *r)
{
    (void)r;
    ((struct sched_out *)user)->done = true;
}

/* Submit n greedy requests of GEN tokens for the prompt pr (outputs in o[0..n)) and step the scheduler until idle. */
static void sched_run_greedy(okv_sched *s, const int32_t *pr, struct sched_out *o, int n)
{
    const struct okv_sampling greedy = {.temperature = 0.0f, .top_p = 1.0f};
    memset(o, 0, sizeof *o * (size_t)n);
    for (int q = 0; q < n; q++) {
        struct okv_sched_request rq = {.prompt = pr, .n_prompt = PROMPT, .max_tokens = GEN, .sampling = greedy,
                                       .ignore_eos = true, .on_token = so_token, .on_finish = so_finish, .user = &o[q]};
        uint64_t id;
        CHECK(okv_sched_submit(s, &rq, &id) == OKV_OK, "submit: %s", okv_last_error());
    }
    bool busy = true;
    for (int step = 0; busy && step < 5000; step++)
        if (okv_sched_step(s, &busy) != OKV_OK) {
            CHECK(0, "sched step: %s", okv_last_error());
            break;
        }
}

/* One greedy request through the scheduler with n-gram drafts (4 a step) and through okv_generate with
 * the same drafter, on a sparse budget: the two decode loops verify, roll back and (with verify_defer)
 * defer alike, so the tokens must be the same. */
static void test_sched_defer(okv_backend *be)
{
    struct synth_model tm;
    synth_model_init(&tm, OKV_ARCH_LLAMA, 777);
    okv_drafter *ng = NULL;
    CHECK(okv_drafter_create("ngram", &tm.m, be, NULL, &ng) == OKV_OK, "ngram: %s", okv_last_error());
    const struct okv_sampling greedy = {.temperature = 0.0f, .top_p = 1.0f};
    for (int df = 0; df < 2 && ng; df++) {
        struct okv_engine_params ep = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 64, .kv_budget = 40,
                                       .predict = OKV_PREDICT_LOOKAHEAD, .verify_defer = df == 1};
        okv_engine *e = NULL;
        CHECK(okv_engine_create(&tm.m, be, &ep, &e) == OKV_OK, "engine: %s", okv_last_error());
        if (!e)
            continue;
        struct okv_gen_result g = {0};
        const enum okv_status gst = gen(e, ng, 4, prompt, PROMPT, greedy, GEN, &g, NULL);
        struct okv_sched_params sp = {.max_num_seqs = 1, .max_num_batched_tokens = 64, .drafter = ng, .spec_tokens = 4};
        okv_sched *s = NULL;
        CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
        struct sched_out o = {0};
        if (s) {
            sched_run_greedy(s, prompt, &o, 1);
            struct okv_sched_metrics m;
            okv_sched_metrics(s, &m);
            CHECK(df ? m.spec_deferred_total > 0 : m.spec_deferred_total == 0,
                  "verify_defer %d: the scheduler deferred %llu steps", df, (unsigned long long)m.spec_deferred_total);
            CHECK(gst != OKV_OK || m.spec_deferred_total == (uint64_t)g.spec.deferred,
                  "verify_defer %d: the scheduler deferred %llu steps, okv_generate %lld", df,
                  (unsigned long long)m.spec_deferred_total, (long long)g.spec.deferred);
            okv_sched_free(s);
        }
        CHECK(gst == OKV_OK && o.done && o.n == GEN && g.n_tokens == GEN &&
                  !memcmp(o.toks, g.tokens, sizeof(int32_t) * (size_t)GEN),
              "verify_defer %d: the scheduler's %d greedy tokens %s okv_generate's %d", df, o.n,
              o.n == GEN && g.n_tokens == GEN && !memcmp(o.toks, g.tokens, sizeof(int32_t) * (size_t)GEN) ? "equal"
                                                                                                  : "differ from",
              g.n_tokens);
        printf("  scheduler vs okv_generate, n-gram drafts, budget 40, verify_defer %d: %d tokens, %lld steps deferred\n",
               df, o.n, (long long)g.spec.deferred);
        okv_gen_result_free(&g);
        CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0, "verify_defer %d: slots leaked", df);
        okv_engine_free(e);
    }
    okv_drafter_free(ng);
    synth_model_free(&tm);
}

/* ---- adaptive draft length ---- */

/* A drafter that is never right: it proposes the token after the last one, plus one, k times. */
static enum okv_status wrong_propose(void *ctx, const int32_t *hist, int n_hist, int k, const struct okv_sampling *s,
                                     struct okv_rng *rng, int32_t *tokens, const float **probs, int *n_out)
{
    (void)ctx, (void)s, (void)rng;
    for (int i = 0; i < k; i++)
        tokens[i] = (hist[n_hist - 1] + 1 + i) % V;
    *probs = NULL;
    *n_out = k;
    return OKV_OK;
}
static void wrong_free(void *ctx) { (void)ctx; }

/* A drafter that is always right and costs nothing: it reads the plain greedy tokens (ctx) ahead. */
struct oracle_drafter {
    const int32_t *toks;   /* plain greedy's generated tokens */
    int n, n_prompt;
};
static enum okv_status oracle_propose(void *ctx, const int32_t *hist, int n_hist, int k, const struct okv_sampling *s,
                                      struct okv_rng *rng, int32_t *tokens, const float **probs, int *n_out)
{
    (void)hist, (void)s, (void)rng;
    const struct oracle_drafter *o = ctx;
    *n_out = 0;
    for (int i = n_hist - o->n_prompt; i < o->n && *n_out < k; i++)
        tokens[(*n_out)++] = o->toks[i];
    *probs = NULL;
    return OKV_OK;
}

static void test_spec_len_unit(void)
{
    /* the acceptance estimate: drafts accepted with probability a each, given the ones before */
    const double as[] = {0.9, 0.5, 0.1};
    for (int ai = 0; ai < 3; ai++) {
        struct okv_spec_len c;
        okv_spec_len_init(&c, 0, 8);
        CHECK(fabs(okv_spec_len_alpha(&c) - 0.6) < 1e-12, "prior acceptance %g", okv_spec_len_alpha(&c));
        struct okv_rng rng;
        okv_rng_seed(&rng, 5 + ai);
        double sum = 0;
        int n = 0;
        for (int step = 0; step < 4000; step++) {
            int acc = 0;
            while (acc < 4 && okv_rng_uniform(&rng) < as[ai])
                acc++;
            okv_spec_len_observe(&c, 4, acc);
            if (step >= 1000) {   /* the forgetting estimate, averaged over its noise */
                sum += okv_spec_len_alpha(&c);
                n++;
            }
        }
        CHECK(fabs(sum / n - as[ai]) < 0.03, "acceptance %g estimated as %g", as[ai], sum / n);
        CHECK(c.steps == 4000, "steps counted %lld", (long long)c.steps);
    }

    /* the chosen length: argmax over k of (1 - a^(k+1)) / (1 - a) / (t0 + k (row + draft)); the forward
     * times lie on t = 1.9 ms + 0.1 ms a row (k drafts: 2.0 + 0.1 k ms), a draft token costs 0 or 0.6 ms */
    struct {
        double alpha, draft;
        int k_max, want;
    } cs[] = {
        {0.9, 0.0, 8, 8},     /* 6.13 / 2.8 = 2.19 at 8 against 5.70 / 2.7 = 2.11 at 7 */
        {0.2, 0.0, 8, 1},     /* 1.2 / 2.1 = 0.571 at 1, 1.24 / 2.2 = 0.564 at 2 */
        {0.7, 0.6, 8, 2},     /* 1.7 / 2.7 = 0.630, 2.19 / 3.4 = 0.644, 2.533 / 4.1 = 0.618 */
        {0.9, 0.6, 8, 4},     /* 3.439 / 4.1 = 0.839, 4.095 / 4.8 = 0.853, 4.686 / 5.5 = 0.852 */
        {0.99, 0.0, 3, 3},    /* at most k_max */
        {0.05, 0.6, 8, 0},    /* none: 1 / 2.0 = 0.5 against 1.05 / 2.7 = 0.389 at 1 */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        struct okv_spec_len c;
        okv_spec_len_init(&c, 0, cs[i].k_max);
        c.trials = 1e6;   /* pin the acceptance */
        c.accepted = cs[i].alpha * 1e6;
        struct okv_spec_cost cost;
        okv_spec_cost_init(&cost);
        for (int r = 1; r <= 9; r++)
            okv_spec_cost_forward(&cost, r, 2e-3 + 1e-4 * r - 1e-4);   /* t0 = 2 ms at one row */
        if (cs[i].draft > 0)
            okv_spec_cost_draft(&cost, 4, 4 * cs[i].draft * 1e-3);
        double t0, row;
        okv_spec_cost_line(&cost, &t0, &row);
        CHECK(fabs(t0 - 1.9e-3) < 1e-9 && fabs(row - 1e-4) < 1e-9, "cost line: %g + %g a row", t0, row);
        /* the reference: the same argmax, by brute force */
        const double d = cs[i].draft * 1e-3;
        int ref = 0;
        double best = 1 / 2.0e-3;   /* no drafts: one token a 2.0 ms step */
        for (int k = 1; k <= cs[i].k_max; k++) {
            double a = 0, p = 1;
            for (int j = 0; j <= k; j++, p *= cs[i].alpha)
                a += p;
            const double g = a / (1.9e-3 + 1e-4 * (k + 1) + k * d);
            if (g > best * (1 + 1e-9)) {
                best = g;
                ref = k;
            }
        }
        const int got = okv_spec_len_best(&c, &cost, 1, 0, OKV_SPEC_MAX_TOKENS);
        CHECK(got == ref, "alpha %.2f, draft %.1f ms, k_max %d: chose %d, the argmax is %d", cs[i].alpha, cs[i].draft,
              cs[i].k_max, got, ref);
        CHECK(got == cs[i].want, "alpha %.2f, draft %.1f ms: chose %d, worked out by hand %d", cs[i].alpha, cs[i].draft,
                  got, cs[i].want);
        CHECK(okv_spec_len_best(&c, &cost, 1, 0, 2) <= 2 && okv_spec_len_best(&c, &cost, 1, 0, 1) == (got > 0) &&
                  okv_spec_len_best(&c, &cost, 1, 0, 0) == 0,
              "the cap is kept");
        if (i == 1)   /* in a batch whose other requests make 4 tokens a step: 5.2 / 2.1 = 2.48 at 1, 5 / 2.0 at 0 */
            CHECK(okv_spec_len_best(&c, &cost, 1, 4.0, OKV_SPEC_MAX_TOKENS) == 0,
                  "alpha 0.2 beside others' 4 tokens: chose %d (0: a draft row delays them too)",
                  okv_spec_len_best(&c, &cost, 1, 4.0, OKV_SPEC_MAX_TOKENS));
        /* the dither: of 16 choices, the best one most often, one less (not below 1) and one more (from 0: the probe) */
        int seen[OKV_SPEC_MAX_TOKENS + 2] = {0};
        for (int j = 0; j < 16; j++)
            seen[okv_spec_len_choose(&c, &cost, 1, 0, OKV_SPEC_MAX_TOKENS, true)]++;
        CHECK(seen[got] >= 12 && seen[got] + (got > 1 ? seen[got - 1] : 0) + (got < cs[i].k_max ? seen[got + 1] : 0) == 16,
              "dither around %d: %d of 16", got, seen[got]);
    }
    /* one row count only: the prior's split; nothing measured: still a length in range */
    struct okv_spec_cost cost;
    okv_spec_cost_init(&cost);
    double t0, row;
    okv_spec_cost_line(&cost, &t0, &row);
    CHECK(t0 == 0 && row == 0, "empty line %g %g", t0, row);
    struct okv_spec_len c;
    okv_spec_len_init(&c, 0, 4);
    const int k0 = okv_spec_len_best(&c, &cost, 1, 0, 4);
    CHECK(k0 >= 1 && k0 <= 4, "no costs yet: %d", k0);
    for (int j = 0; j < 10; j++)
        okv_spec_cost_forward(&cost, 5, 1e-3);
    okv_spec_cost_line(&cost, &t0, &row);
    CHECK(t0 > 0 && row > 0 && fabs(t0 + 4 * row - 1e-3) < 1e-12, "one row count: %g + %g a row", t0, row);
    {   /* a staircase of step times (a GPU's padded sizes): each row count measured often is priced by its own mean,
         * so the length chosen is the staircase's best, where a line through it would choose another */
        struct okv_spec_cost st;
        okv_spec_cost_init(&st);
        static const double ms[10] = {0, 0.32, 0.52, 0.43, 0.43, 0.62, 0.64, 0.54, 0.55, 0.92};
        for (int rep = 0; rep < 10; rep++)
            for (int r = 1; r <= 9; r++)
                okv_spec_cost_forward(&st, r, ms[r] * 1e-3);
        struct okv_spec_len sl;
        okv_spec_len_init(&sl, 0, 8);
        sl.trials = 1e6;
        sl.accepted = 0.55e6;
        int want = 0;
        double best = 0;
        for (int k = 0; k <= 8; k++) {   /* brute force over the staircase */
            double a = 1, p = 1;
            for (int i = 0; i < k; i++)
                a += (p *= 0.55);
            if (a / ms[1 + k] > best * (1 + 1e-9)) {
                best = a / ms[1 + k];
                want = k;
            }
        }
        const int got = okv_spec_len_best(&sl, &st, 1, 0, 8);
        CHECK(got == want && want == 3, "staircase costs: chose %d, its best %d", got, want);
    }
    {   /* the first two forwards of a row count are not measured (a GPU's one-time costs of a shape) */
        struct okv_spec_cost w;
        okv_spec_cost_init(&w);
        int kept = 0;
        for (int j = 0; j < 5; j++)
            kept += okv_spec_cost_settled(&w, 9);
        CHECK(kept == 3 && okv_spec_cost_settled(&w, 2) == false && okv_spec_cost_settled(&w, 2) == false &&
              okv_spec_cost_settled(&w, 2) && okv_spec_cost_settled(&w, 65) && okv_spec_cost_settled(&w, 1000),
              "settled: %d of 5 forwards of 9 rows measured", kept);
    }
    okv_spec_cost_forward(&cost, 0, 1.0);   /* ignored */
    okv_spec_cost_forward(&cost, 3, -1.0);
    okv_spec_len_observe(&c, 0, 0);
    double t1, r1;
    okv_spec_cost_line(&cost, &t1, &r1);
    CHECK(t1 == t0 && r1 == row && c.steps == 0, "bad observations are ignored");
    /* k_min 1 (drafted rows choose blocks): the weak draft of the last case still drafts one a step */
    okv_spec_len_init(&c, 1, 8);
    c.trials = 1e6;
    c.accepted = 0.05e6;
    okv_spec_cost_init(&cost);
    for (int r = 1; r <= 9; r++)
        okv_spec_cost_forward(&cost, r, 1.9e-3 + 1e-4 * r);
    okv_spec_cost_draft(&cost, 4, 4 * 0.6e-3);
    int lo = 99, hi = 0;
    for (int j = 0; j < 16; j++) {
        const int k = okv_spec_len_choose(&c, &cost, 1, 0, 8, true);
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    CHECK(okv_spec_len_best(&c, &cost, 1, 0, 8) == 1 && lo == 1 && hi <= 2, "k_min 1: best %d, chosen %d..%d",
          okv_spec_len_best(&c, &cost, 1, 0, 8), lo, hi);
    /* the same weak draft at k_min 0: nothing pays, so a one-token probe now and then; a due probe waits while
     * probe_ok is false (a batch step that drafts for no one) and runs at the first step that allows it */
    okv_spec_len_init(&c, 0, 8);
    c.trials = 1e6;
    c.accepted = 0.05e6;
    int probes = 0, waited = 0;
    for (int j = 0; j < 200; j++)
        probes += okv_spec_len_choose(&c, &cost, 1, 0, 8, true);
    CHECK(probes >= 3 && probes <= 25, "nothing pays: %d probes in 200 steps", probes);
    for (int j = 0; j < 200; j++)
        waited += okv_spec_len_choose(&c, &cost, 1, 0, 8, false);
    CHECK(waited == 0, "probes wait while not allowed (%d drafted)", waited);
    CHECK(okv_spec_len_choose(&c, &cost, 1, 0, 8, true) == 1 && okv_spec_len_choose(&c, &cost, 1, 0, 8, true) == 0,
          "the waiting probe runs at the first step allowed, once");
    okv_spec_len_init(&c, 0, 99);
    CHECK(c.k_max == OKV_SPEC_MAX_TOKENS, "k_max clamps to %d: %d", OKV_SPEC_MAX_TOKENS, c.k_max);
}

/* okv_generate and the scheduler with spec_adaptive: plain greedy's tokens; with given costs (a GPU-like
 * step) a free drafter that is always right drafts near K a step, one that is always wrong mostly none, and the
 * target itself as the drafter (always right, but a draft token costs a target step) near one too: drafting
 * cannot pay there. */
static void test_adaptive(okv_backend *be)
{
    struct synth_model tm;
    synth_model_init(&tm, OKV_ARCH_LLAMA, 4242);
    struct okv_rng rng;
    okv_rng_seed(&rng, 99);
    int32_t pr[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        pr[i] = (int32_t)(okv_rng_next(&rng) % V);
    okv_drafter *self = make_model_drafter(&tm.m, be, 512), *wrong = NULL, *oracle = NULL;
    struct oracle_drafter od = {NULL, 0, PROMPT};
    static const struct okv_drafter_i oracle_i = {.name = "oracle", .propose = oracle_propose, .free = wrong_free};
    CHECK(okv_drafter_create_custom(&oracle_i, &od, &oracle) == OKV_OK, "custom drafter: %s", okv_last_error());
    static const struct okv_drafter_i wrong_i = {.name = "wrong", .propose = wrong_propose, .free = wrong_free};
    CHECK(okv_drafter_create_custom(&wrong_i, NULL, &wrong) == OKV_OK, "custom drafter: %s", okv_last_error());
    okv_engine *e = make_engine(&tm.m, be, 0, OKV_PREDICT_CURRENT);
    const struct okv_sampling greedy = {0};
    const int N = 120, K = 8;
    struct okv_gen_result plain = {0};
    if (!self || !wrong || !oracle || !e || gen(e, NULL, 0, pr, PROMPT, greedy, N, &plain, NULL) != OKV_OK)
        goto done;
    od.toks = plain.tokens;
    od.n = plain.n_tokens;
    /* the costs to choose with (measured ones depend on the machine): a forward of 10 ms + 0.1 ms a row (a
     * GPU's decode step), a draft token free (the oracle, the wrong drafter) or two target steps (self: so it
     * measures on this CPU, the drafter's engine one token a forward) */
    for (int di = 0; di < 3; di++) {
        okv_drafter *d = di == 0 ? oracle : di == 1 ? wrong : self;
        struct okv_spec_cost cost;
        okv_spec_cost_init(&cost);
        for (int r = 1; r <= 9; r++)
            okv_spec_cost_forward(&cost, r, 10e-3 + 1e-4 * r);
        okv_spec_cost_draft(&cost, 1, di == 2 ? 20e-3 : 0.0);
        struct okv_gen_params gp = {.max_tokens = N, .sampling = greedy, .drafter = d, .spec_tokens = K,
                                    .spec_adaptive = true, .spec_cost = &cost};
        struct okv_gen_result r;
        CHECK(okv_generate(e, NULL, pr, PROMPT, &gp, NULL, NULL, &r) == OKV_OK, "adaptive %s: %s", okv_drafter_name(d),
              okv_last_error());
        check_stats(&r.spec, okv_drafter_name(d));
        check_no_slots(e, d, "adaptive");
        CHECK(r.n_tokens == N && !memcmp(r.tokens, plain.tokens, sizeof(int32_t) * (size_t)N),
              "adaptive %s: the tokens differ from plain greedy's", okv_drafter_name(d));
        const double per_step = r.spec.drafts ? (double)r.spec.draft_tokens / (double)r.spec.drafts : 0;
        printf("  adaptive, %-24s %3lld verify steps, %.2f drafts a step, acceptance %.3f\n",
               di == 0 ? "a free drafter, right:" : di == 1 ? "a drafter always wrong:" : "the target as drafter:",
               (long long)r.spec.drafts, per_step, r.spec.acceptance_rate);
        if (di == 0)   /* K a step but the dither's one in eight (K - 1) and the last steps (max_tokens) */
            CHECK(per_step >= K - 1.0 && r.spec.acceptance_rate == 1.0, "oracle drafter: %.2f drafts a step (K %d)",
                  per_step, K);
        else if (di == 1)   /* no drafts once the acceptance has fallen (~1%: drafts are free here), but a probe
                               every eight steps: fewer than half the steps verify a draft */
            CHECK(2 * r.spec.drafts < N && r.spec.accepted_tokens == 0,
                  "wrong drafter: %lld of the steps verified drafts", (long long)r.spec.drafts);
        else
            CHECK(per_step <= 1.5 && r.spec.acceptance_rate > 0.95, "self drafter: %.2f drafts a step, acceptance %.3f",
                  per_step, r.spec.acceptance_rate);
        okv_gen_result_free(&r);
    }
    /* a sparse engine whose drafted rows choose blocks (lookahead): a step without drafts would select as
     * `current` does, so the wrong drafter still drafts on every step */
    {
        okv_engine *es = make_engine(&tm.m, be, 40, OKV_PREDICT_LOOKAHEAD);
        struct okv_spec_cost cost;
        okv_spec_cost_init(&cost);
        for (int r = 1; r <= 9; r++)
            okv_spec_cost_forward(&cost, r, 10e-3 + 1e-4 * r);
        okv_spec_cost_draft(&cost, 1, 0.0);
        struct okv_gen_params gp = {.max_tokens = N, .sampling = greedy, .drafter = wrong, .spec_tokens = K,
                                    .spec_adaptive = true, .spec_cost = &cost};
        struct okv_gen_result r;
        CHECK(es && okv_engine_drafts_select(es) && !okv_engine_drafts_select(e), "drafts_select: sparse lookahead only");
        if (es && okv_generate(es, NULL, pr, PROMPT, &gp, NULL, NULL, &r) == OKV_OK) {
            CHECK(r.n_tokens == N && r.spec.drafts == N - 2 && r.spec.accepted_tokens == 0,   /* the last step has no room */
                  "sparse lookahead, wrong drafter: %lld of %d steps drafted", (long long)r.spec.drafts, N - 2);
            check_no_slots(es, wrong, "sparse lookahead adaptive");
            okv_gen_result_free(&r);
        } else {
            CHECK(0, "sparse lookahead adaptive: %s", okv_last_error());
        }
        okv_engine_free(es);
    }
    /* the scheduler: the wrong drafter through serve's loop, adaptive (measured costs): plain greedy's tokens,
     * drafts on fewer than half the steps */
    struct okv_sched_params sp = {.max_num_seqs = 2, .max_num_batched_tokens = 64, .drafter = wrong, .spec_tokens = K,
                                  .spec_adaptive = true};
    okv_sched *s = NULL;
    CHECK(okv_sched_create(e, NULL, &sp, &s) == OKV_OK, "sched: %s", okv_last_error());
    if (s) {
        struct sched_out o[2];
        sched_run_greedy(s, pr, o, 2);
        struct okv_sched_metrics m;
        okv_sched_metrics(s, &m);
        for (int q = 0; q < 2; q++)
            CHECK(o[q].done && o[q].n == GEN && !memcmp(o[q].toks, plain.tokens, sizeof(int32_t) * (size_t)GEN),
                  "scheduler, adaptive, request %d: %d tokens, %s plain greedy's", q, o[q].n,
                  o[q].n == GEN && !memcmp(o[q].toks, plain.tokens, sizeof(int32_t) * GEN) ? "equal to" : "not");
        const double per_step = m.spec_drafts_total ? (double)m.spec_draft_tokens_total / (double)m.spec_drafts_total : 0;
        printf("  scheduler, adaptive, a drafter always wrong: %llu of %d decode steps verified drafts, %.2f drafts a step\n",
               (unsigned long long)m.spec_drafts_total, 2 * GEN, per_step);
        CHECK(m.spec_drafts_total < (uint64_t)GEN && m.spec_accepted_tokens_total == 0,
              "scheduler, wrong drafter: %llu of %d decode steps verified drafts", (unsigned long long)m.spec_drafts_total,
              2 * GEN);
        okv_sched_free(s);
    }
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0, "adaptive: slots leaked");
done:
    okv_gen_result_free(&plain);
    okv_engine_free(e);
    okv_drafter_free(self);
    okv_drafter_free(wrong);
    okv_drafter_free(oracle);
    synth_model_free(&tm);
}

/* ---- the sampling distribution ---- */

#define SPROMPT 40
#define NT 3          /* tokens whose joint distribution is compared */
#define NRUNS 4000

#define MAX_CELLS (8 * 8 * 8)   /* top-k 8, three tokens */

static double exact[MAX_CELLS];   /* P(t0, t1, t2) of each cell of the support */
static int32_t cells[MAX_CELLS];  /* the cell's joint index (t0 * V + t1) * V + t2, ascending */

/* The target's exact joint distribution of the first three sampled tokens. */
static int exact_joint(okv_engine *e, const int32_t *pr, const struct okv_sampling *s)
{
    static float logits[V], p0[V], p1[V], p2[V];
    int seq;
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "seq");
    int32_t seqs[SPROMPT];
    uint8_t want[SPROMPT] = {0};
    for (int i = 0; i < SPROMPT; i++)
        seqs[i] = seq;
    want[SPROMPT - 1] = 1;
    struct okv_batch b = {SPROMPT, pr, seqs, want, NULL};
    CHECK(okv_engine_forward(e, &b, logits) == OKV_OK, "prefill: %s", okv_last_error());
    okv_sampling_probs(logits, V, s, p0);
    uint8_t one = 1;
    int n_cells = 0;
    for (int32_t a = 0; a < V; a++) {
        if (p0[a] <= 0)
            continue;
        struct okv_batch ba = {1, &a, &seq, &one, NULL};
        CHECK(okv_engine_forward(e, &ba, logits) == OKV_OK, "forward");
        okv_sampling_probs(logits, V, s, p1);
        for (int32_t bt = 0; bt < V; bt++) {
            if (p1[bt] <= 0)
                continue;
            struct okv_batch bb = {1, &bt, &seq, &one, NULL};
            CHECK(okv_engine_forward(e, &bb, logits) == OKV_OK, "forward");
            okv_sampling_probs(logits, V, s, p2);
            for (int32_t c = 0; c < V; c++)
                if (p2[c] > 0 && n_cells < MAX_CELLS) {
                    exact[n_cells] = (double)p0[a] * p1[bt] * p2[c];
                    cells[n_cells++] = (a * V + bt) * V + c;
                }
            okv_engine_seq_truncate(e, seq, SPROMPT + 1);
        }
        okv_engine_seq_truncate(e, seq, SPROMPT);
    }
    okv_engine_seq_free(e, seq);
    return n_cells;
}

/* Chi-square of the observed joint counts against the exact distribution, cells
 * with an expected count under 5 pooled. Returns the statistic; *dof set; *tv the
 * total-variation distance. Counts outside the support make it infinite. */
static double chi_square(const int *counts, int n_cells, int n_runs, int outside, int *dof, double *tv)
{
    double chi = 0, pool_e = 0, pool_o = 0, t = 0;
    int bins = 0;
    for (int i = 0; i < n_cells; i++) {
        double ex = exact[i] * n_runs, ob = counts[i];
        t += fabs(ob / n_runs - exact[i]);
        if (ex < 5) {
            pool_e += ex;
            pool_o += ob;
            continue;
        }
        chi += (ob - ex) * (ob - ex) / ex;
        bins++;
    }
    if (pool_e > 0) {
        chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        bins++;
    }
    *dof = bins - 1;
    *tv = 0.5 * (t + (double)outside / n_runs);
    return outside ? INFINITY : chi;
}

static int find_cell(int n_cells, int idx)
{
    int lo = 0, hi = n_cells - 1;   /* cells are sorted (built in index order) */
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cells[mid] == idx)
            return mid;
        if (cells[mid] < idx)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int counts[MAX_CELLS];

static void test_sampling(okv_backend *be)
{
    struct synth_model tm, dm;
    synth_model_init(&tm, OKV_ARCH_LLAMA, 4242);
    synth_model_init(&dm, OKV_ARCH_LLAMA, 5151);
    /* a prompt holding every token, so that prompt lookup always proposes */
    int32_t pr[SPROMPT];
    struct okv_rng rng;
    okv_rng_seed(&rng, 77);
    for (int i = 0; i < SPROMPT; i++)
        pr[i] = (int32_t)(okv_rng_next(&rng) % V);
    const struct okv_sampling s = {.temperature = 1.5f, .top_k = 8, .top_p = 1.0f};
    okv_engine *e = make_engine(&tm.m, be, 0, OKV_PREDICT_CURRENT);
    int n_cells = exact_joint(e, pr, &s);
    CHECK(n_cells > 0 && n_cells <= MAX_CELLS, "support of %d cells", n_cells);
    double total = 0;
    for (int i = 0; i < n_cells; i++)
        total += exact[i];
    CHECK(fabs(total - 1.0) < 1e-4, "exact joint sums to %g", total);

    okv_drafter *ds[5] = {NULL};
    const char *names[5] = {"plain", "ngram", "model", "self/bounded", "model/adaptive"};
    struct okv_drafter_params np = {.ngram_min = 1};
    CHECK(okv_drafter_ngram_create(&np, &ds[1]) == OKV_OK, "ngram");
    ds[2] = make_model_drafter(&dm.m, be, 512);
    ds[3] = make_model_drafter(&tm.m, be, 12);
    ds[4] = ds[2];   /* the adaptive length (its own measured costs: lengths vary from step to step and run to run) */
    /* under ThreadSanitizer a tenth of the runs (~200 s -> ~20 s): the same drafters, threads and checks but the
     * chi-square, which the plain build's run makes */
    const int nruns = TU_TSAN ? NRUNS / 10 : NRUNS;
    for (int di = 0; di < 5; di++) {
        memset(counts, 0, sizeof(int) * (size_t)n_cells);
        int outside = 0;
        struct okv_spec_stats sum = {0};
        for (int r = 0; r < nruns; r++) {
            struct okv_sampling sr = s;
            sr.seed = 1000003ull * (uint64_t)(di + 1) + (uint64_t)r;
            struct okv_gen_result res;
            struct okv_gen_params gp = {.max_tokens = 6, .sampling = sr, .drafter = ds[di], .spec_tokens = 4,
                                        .spec_adaptive = di == 4};
            if (okv_generate(e, NULL, pr, SPROMPT, &gp, NULL, NULL, &res) != OKV_OK) {
                CHECK(0, "%s: %s", names[di], okv_last_error());
                break;
            }
            CHECK(res.n_tokens == 6, "%s: %d tokens", names[di], res.n_tokens);
            int idx = (res.tokens[0] * V + res.tokens[1]) * V + res.tokens[2];
            int cell = find_cell(n_cells, idx);
            if (cell < 0)
                outside++;
            else
                counts[cell]++;
            sum.drafts += res.spec.drafts;
            sum.draft_tokens += res.spec.draft_tokens;
            sum.accepted_tokens += res.spec.accepted_tokens;
            for (int i = 0; i < OKV_SPEC_MAX_TOKENS; i++) {
                sum.pos_proposed[i] += res.spec.pos_proposed[i];
                sum.pos_accepted[i] += res.spec.pos_accepted[i];
            }
            okv_gen_result_free(&res);
        }
        okv_spec_stats_finish(&sum);
        if (getenv("OKV_TEST_DEBUG"))
            printf("  %s: position 0 %lld/%lld, 1 %lld/%lld, steps %lld\n", names[di], (long long)sum.pos_accepted[0],
                   (long long)sum.pos_proposed[0], (long long)sum.pos_accepted[1], (long long)sum.pos_proposed[1],
                   (long long)sum.drafts);
        check_stats(&sum, names[di]);
        check_no_slots(e, ds[di], names[di]);
        int dof;
        double tv, chi = chi_square(counts, n_cells, nruns, outside, &dof, &tv);
        /* about p < 1e-4 for a correct sampler; the seeds are fixed, so the test is deterministic */
        double limit = dof + 4.5 * sqrt(2.0 * dof);
        printf("  sampling %-13s chi2 %.1f (dof %d, limit %.1f), TV %.4f, outside %d; accepted %lld/%lld (rate %.3f)\n",
               names[di], chi, dof, limit, tv, outside, (long long)sum.accepted_tokens, (long long)sum.draft_tokens,
               sum.acceptance_rate);
        if (TU_TSAN)
            printf("  SKIP the chi-square under ThreadSanitizer (%d runs; the plain build's run checks it)\n", nruns);
        else
            CHECK(chi < limit, "%s: chi-square %.1f above %.1f (dof %d): the distribution of the tokens moved", names[di], chi,
              limit, dof);
        if (di > 0)
            CHECK(sum.draft_tokens > 0 && sum.accepted_tokens > 0 && sum.accepted_tokens < sum.draft_tokens,
                  "%s: rejection sampling not exercised (%lld/%lld)", names[di], (long long)sum.accepted_tokens,
                  (long long)sum.draft_tokens);
    }
    for (int di = 0; di < 4; di++)   /* ds[4] is ds[2] */
        okv_drafter_free(ds[di]);
    okv_engine_free(e);
    synth_model_free(&tm);
    synth_model_free(&dm);
}

static void test_errors(okv_backend *be)
{
    struct synth_model tm;
    synth_model_init(&tm, OKV_ARCH_LLAMA, 1);
    okv_drafter *d = NULL;
    CHECK(okv_drafter_create("bogus", &tm.m, be, NULL, &d) == OKV_ERR_INVALID_ARG && !d &&
              strstr(okv_last_error(), "ngram, self or model:PATH"),
          "bad name: %s", okv_last_error());
    CHECK(okv_drafter_create("model:", &tm.m, be, NULL, &d) == OKV_ERR_INVALID_ARG && !d, "empty path: %s", okv_last_error());
    CHECK(okv_drafter_create("model:/nonexistent/draft.gguf", &tm.m, be, NULL, &d) != OKV_OK && !d, "missing file");
    CHECK(okv_drafter_model_create(&tm.m, V + 1, be, NULL, &d) == OKV_ERR_INVALID_ARG && !d &&
              strstr(okv_last_error(), "vocabulary"),
          "vocab mismatch: %s", okv_last_error());
    struct okv_drafter_params bad = {.ngram_min = 3, .ngram_max = 2};
    CHECK(okv_drafter_ngram_create(&bad, &d) == OKV_ERR_INVALID_ARG && !d, "ngram bounds");
    /* "self" works through the name too, and spec_tokens is range-checked */
    struct okv_drafter_params dp = {.block_size = 4, .kv_budget = 64, .max_ctx = 512};
    CHECK(okv_drafter_create("self", &tm.m, be, &dp, &d) == OKV_OK && d, "self: %s", okv_last_error());
    okv_engine *e = make_engine(&tm.m, be, 0, OKV_PREDICT_CURRENT);
    struct okv_gen_params gp = {.max_tokens = 4, .drafter = d, .spec_tokens = OKV_SPEC_MAX_TOKENS + 1};
    struct okv_gen_result r;
    int32_t pr[3] = {1, 2, 3};
    CHECK(okv_generate(e, NULL, pr, 3, &gp, NULL, NULL, &r) == OKV_ERR_INVALID_ARG && strstr(okv_last_error(), "spec_tokens"),
          "spec_tokens: %s", okv_last_error());
    okv_engine_free(e);
    okv_drafter_free(d);
    synth_model_free(&tm);
}

static void log_stderr(enum okv_log_level level, const char *msg, void *user)
{
    (void)user, (void)level;
    fprintf(stderr, "  [log] %s\n", msg);
}

int main(void)
{
    okv_backend *be = NULL;
    if (getenv("OKV_TEST_DEBUG"))
        okv_log_set(log_stderr, NULL, OKV_LOG_LEVEL_DEBUG);
    struct okv_backend_params bp = {.n_threads = 1};
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    test_errors(be);
    test_greedy(OKV_ARCH_LLAMA, be);
    test_greedy(OKV_ARCH_QWEN2, be);
    test_greedy(OKV_ARCH_QWEN3, be);
    test_sched_defer(be);
    test_spec_len_unit();
    test_adaptive(be);
    test_sampling(be);
    okv_backend_free(be);
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_spec");
}
