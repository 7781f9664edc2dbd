/* The evaluation runner: every configuration decodes the same samples greedily on an
 * engine of its own (one at a time, so one copy of the weights is alive), dense first;
 * and the teacher-forced fidelity measure (as bench/bench_sparse.c does it). */
#include "eval_internal.h"
#include "oasiskv/generate.h"
#include "oasiskv/spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define EVAL_BLOCK 16
#define EVAL_SLACK 40   /* positions past the context for verify rows of speculative decoding */

static void progress(okv_eval_progress_fn fn, void *user, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void progress(okv_eval_progress_fn fn, void *user, const char *fmt, ...)
{
    if (!fn)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(user, line);
}

const char *okv_eval_predict_name(const struct okv_eval_config *c)
{
    if (c->predict == OKV_PREDICT_ORACLE)
        return "oracle";
    if (c->predict == OKV_PREDICT_LAYER_AHEAD)
        return c->ahead_after_attention ? "layer-ahead-attn" : "layer-ahead";
    if (c->predict == OKV_PREDICT_LOOKAHEAD)
        return c->predict_from_prompt ? "lookahead-from-prompt" : "lookahead";
    return c->predict_from_prompt ? "current-from-prompt" : "current";
}

static enum okv_status make_engine(const struct okv_model *m, okv_backend *be, const struct okv_eval_config *cfg,
                                   int max_ctx, int chunk, bool track_recall, okv_engine **e)
{
    struct okv_engine_params ep = {.block_size = EVAL_BLOCK, .max_ctx = max_ctx, .max_batch_tokens = chunk,
                                   .kv_budget = cfg->kv_budget, .dense_layers = cfg->dense_layers,
                                   .predict = cfg->predict, .predict_from_prompt = cfg->predict_from_prompt,
                                   .track_recall = track_recall,
                                   .cache_factor = cfg->cache_factor, .sticky = cfg->sticky,
                                   .key_code_bits = cfg->key_code_bits, .host_fp8 = cfg->host_fp8,
                                   .verify_inline = cfg->verify_inline,
                                   .verify_defer = cfg->verify_defer,
                                   .ahead_after_attention = cfg->ahead_after_attention,
                                   .merge = cfg->merge};
    int blocks = (max_ctx + EVAL_BLOCK - 1) / EVAL_BLOCK + 1;
    if (cfg->kv_budget == 0)
        ep.kv_slots = blocks;
    else
        ep.host_blocks = blocks;
    return okv_engine_create(m, be, &ep, e);
}

static enum okv_status make_drafter(const struct okv_model *m, okv_backend *be, const struct okv_eval_config *cfg,
                                    const char *lookahead_draft, int max_ctx, int chunk, okv_drafter **d)
{
    *d = NULL;
    const char *name = cfg->draft;
    if (!name && cfg->predict == OKV_PREDICT_LOOKAHEAD && cfg->kv_budget > 0)
        name = lookahead_draft ? lookahead_draft : "ngram";
    if (!name)
        return OKV_OK;
    struct okv_drafter_params dp = {.max_ctx = max_ctx, .max_batch_tokens = chunk};
    return okv_drafter_create(name, m, be, &dp, d);
}

static bool no_stream(void *user, int32_t token, const char *text, size_t len) { return true; }

enum okv_status okv_eval_run(const struct okv_model *m, const okv_tokenizer *tok, okv_backend *be,
                             const okv_eval_ctx *c, const struct okv_eval_run_params *p,
                             const struct okv_eval_config *cfgs, int n_cfgs, struct okv_eval_cell *out)
{
    if (!p || p->num_samples <= 0 || n_cfgs <= 0 || p->first_index < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "eval: nothing to run (samples %d from %d, configurations %d)",
                             p ? p->num_samples : 0, p ? p->first_index : 0, n_cfgs);
    const int N = p->num_samples;
    int chunk = p->prefill_chunk > 0 ? p->prefill_chunk : 512;
    /* the caller checks the context against the model's (tests run tiny models past theirs) */
    int max_ctx = p->context_len + EVAL_SLACK;
    enum okv_status st = OKV_OK;
    struct okv_eval_sample *samples = okv_calloc((size_t)N, sizeof *samples, OKV_TAG_MISC);
    char **dense_text = okv_calloc((size_t)N, sizeof(char *), OKV_TAG_MISC);
    double *dense_partial = okv_calloc((size_t)N, sizeof(double), OKV_TAG_MISC);
    bool *dense_ok = okv_calloc((size_t)N, sizeof(bool), OKV_TAG_MISC);
    int *order = okv_malloc(sizeof(int) * (size_t)n_cfgs, OKV_TAG_MISC);
    if (!samples || !dense_text || !dense_partial || !dense_ok || !order) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "eval: out of memory");
        goto done;
    }
    double t0 = okv_now();
    for (int i = 0; i < N; i++) {
        struct okv_eval_gen g = {.task = p->task, .context_len = p->context_len, .seed = p->seed, .index = p->first_index + i,
                                 .depth = -1, .max_tokens = p->max_tokens};
        if ((st = okv_eval_sample_make(c, &g, &samples[i])) != OKV_OK)
            goto done;
    }
    progress(p->progress, p->user, "%s: %d samples of %d-token context generated (%.1f s)", p->task, N,
             p->context_len, okv_now() - t0);

    int n_order = 0;
    for (int k = 0; k < n_cfgs; k++)
        if (cfgs[k].kv_budget == 0)
            order[n_order++] = k;
    for (int k = 0; k < n_cfgs; k++)
        if (cfgs[k].kv_budget != 0)
            order[n_order++] = k;
    bool have_dense = false;
    for (int oi = 0; oi < n_cfgs; oi++) {
        const int k = order[oi];
        const struct okv_eval_config *cfg = &cfgs[k];
        struct okv_eval_cell *cell = &out[k];
        memset(cell, 0, sizeof *cell);
        cell->cfg = *cfg;
        cell->same_as_dense = have_dense ? 0 : -1;
        cell->resident_in_time = 1;
        char label[96];
        if (cfg->kv_budget)
            snprintf(label, sizeof label, "budget %d %s", cfg->kv_budget, okv_eval_predict_name(cfg));
        else
            snprintf(label, sizeof label, "dense");
        /* within the budget the engine runs dense: its outputs are dense's */
        if (p->reuse_full_budget && have_dense && cfg->kv_budget >= p->context_len) {
            const struct okv_eval_cell *d = NULL;
            for (int j = 0; j < n_cfgs; j++)
                if (cfgs[j].kv_budget == 0)
                    d = &out[j];
            cell->n = d->n;
            cell->correct = d->correct;
            cell->partial = d->partial;
            cell->same_as_dense = d->n;
            cell->copied_from_dense = true;
            cell->gen_tokens = d->gen_tokens;
            cell->prompt_tokens = d->prompt_tokens;
            cell->prompt_room = d->prompt_room;
            okv_eval_wilson(cell->correct, cell->n, &cell->lo, &cell->hi);
            for (int i = 0; i < N && p->on_sample; i++)
                p->on_sample(p->user, k, p->first_index + i, &samples[i], dense_text[i], dense_partial[i], dense_ok[i]);
            progress(p->progress, p->user, "%s ctx %d %s: budget covers the context, dense's results", p->task,
                     p->context_len, label);
            continue;
        }
        okv_engine *e = NULL;
        okv_drafter *dr = NULL;
        if ((st = make_engine(m, be, cfg, max_ctx, chunk, false, &e)) != OKV_OK)
            goto done;
        if ((st = make_drafter(m, be, cfg, p->lookahead_draft, max_ctx, chunk, &dr)) != OKV_OK) {
            okv_engine_free(e);
            goto done;
        }
        double tc = okv_now();
        int64_t spec_drafted = 0, spec_accepted = 0, spec_steps = 0;
        double psum = 0;
        for (int i = 0; i < N; i++) {
            const struct okv_eval_sample *s = &samples[i];
            struct okv_gen_params gp = {.max_tokens = s->max_tokens, .sampling = {0, 0, 1, p->seed},
                                        .prefill_chunk = chunk, .drafter = dr,
                                        .spec_tokens = dr ? (cfg->spec_tokens > 0 ? cfg->spec_tokens : 4) : 0,
                                        .spec_adaptive = dr && cfg->spec_adaptive};
            struct okv_gen_result res;
            double ts = okv_now();
            if ((st = okv_generate(e, tok, s->tokens, s->n_tokens, &gp, no_stream, NULL, &res)) != OKV_OK) {
                okv_drafter_free(dr);
                okv_engine_free(e);
                goto done;
            }
            bool ok;
            double part = okv_eval_score(s->score, (const char *const *)s->answers, s->n_answers, res.text, &ok);
            cell->n++;
            cell->correct += ok;
            psum += part;
            cell->gen_tokens += res.n_tokens;
            cell->prompt_tokens += s->n_tokens;
            cell->prompt_room += p->context_len - s->max_tokens;
            spec_drafted += res.spec.draft_tokens;
            spec_accepted += res.spec.accepted_tokens;
            spec_steps += res.spec.drafts;
            bool same = false;
            if (!have_dense) {
                if (cfg->kv_budget == 0) {
                    dense_text[i] = okv_strdup(res.text, OKV_TAG_MISC);
                    dense_partial[i] = part;
                    dense_ok[i] = ok;
                }
            } else {
                same = dense_text[i] && !strcmp(dense_text[i], res.text);
                cell->same_as_dense += same;
            }
            if (p->on_sample)
                p->on_sample(p->user, k, p->first_index + i, s, res.text, part, ok);
            progress(p->progress, p->user, "%s ctx %d %s: sample %d/%d (%d tokens) %s%s, %.1f s", p->task,
                     p->context_len, label, p->first_index + i + 1, p->first_index + N, s->n_tokens, ok ? "right" : "wrong",
                     have_dense ? (same ? ", = dense" : ", differs from dense") : "", okv_now() - ts);
            okv_gen_result_free(&res);
        }
        cell->partial = psum / N;
        cell->seconds = okv_now() - tc;
        okv_eval_wilson(cell->correct, cell->n, &cell->lo, &cell->hi);
        struct okv_engine_stats es;
        okv_engine_stats_get(e, &es);
        cell->fetch_bytes = es.fetch_bytes;
        cell->resident_in_time = es.units_selected ? (double)es.units_in_time / (double)es.units_selected : 1.0;
        cell->accept_rate = spec_drafted ? (double)spec_accepted / (double)spec_drafted : 0;
        cell->drafts_per_step = spec_steps ? (double)spec_drafted / (double)spec_steps : 0;
        okv_drafter_free(dr);
        okv_engine_free(e);
        progress(p->progress, p->user, "%s ctx %d %s: %d/%d right (%.1f s)", p->task, p->context_len, label,
                 cell->correct, cell->n, cell->seconds);
        if (cfg->kv_budget == 0 && !have_dense)
            have_dense = true;
    }
done:
    for (int i = 0; samples && i < N; i++)
        okv_eval_sample_free(&samples[i]);
    for (int i = 0; dense_text && i < N; i++)
        okv_free(dense_text[i]);
    okv_free(samples);
    okv_free(dense_text);
    okv_free(dense_partial);
    okv_free(dense_ok);
    okv_free(order);
    return st;
}

/* ---- teacher-forced fidelity ---- */

enum okv_status okv_eval_fidelity(const struct okv_model *m, okv_backend *be, const int32_t *prompt, int n_prompt,
                                  int steps, const struct okv_eval_config *cfgs, int n_cfgs, bool track_recall,
                                  okv_eval_progress_fn prog, void *user, struct okv_eval_fid_cell *out)
{
    if (n_prompt <= 0 || steps <= 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "eval: fidelity needs a prompt and steps (got %d, %d)", n_prompt,
                             steps);
    const int V = m->cfg.vocab_size, chunk = 512, K = 4;
    const int ctx = n_prompt + steps + K + 8;
    enum okv_status st = OKV_OK;
    float *ref_lp = okv_malloc(sizeof(float) * (size_t)steps * (size_t)V, OKV_TAG_MISC);
    float *logits = okv_malloc(sizeof(float) * (size_t)V * (K + 1), OKV_TAG_MISC);
    float *lp = okv_malloc(sizeof(float) * (size_t)V, OKV_TAG_MISC);
    int32_t *dense_tok = okv_malloc(sizeof(int32_t) * (size_t)steps, OKV_TAG_MISC);
    int32_t *hist = okv_malloc(sizeof(int32_t) * (size_t)ctx, OKV_TAG_MISC);
    okv_engine *e = NULL;
    if (!ref_lp || !logits || !lp || !dense_tok || !hist) {
        st = okv_set_error(OKV_ERR_NO_MEMORY, "eval: fidelity: out of memory (%d steps x %d vocabulary)", steps, V);
        goto done;
    }
    memcpy(hist, prompt, sizeof(int32_t) * (size_t)n_prompt);
    /* dense reference: greedy path and its distributions */
    struct okv_eval_config dense = {0};
    double t0 = okv_now();
    int seq;
    if ((st = make_engine(m, be, &dense, ctx, chunk, false, &e)) != OKV_OK ||
        (st = okv_engine_seq_create(e, &seq)) != OKV_OK || (st = okv_engine_prefill(e, seq, prompt, n_prompt, chunk, logits)) != OKV_OK)
        goto done;
    for (int s = 0; s < steps; s++) {
        okv_log_softmax(logits, V, ref_lp + (size_t)s * V);
        dense_tok[s] = okv_argmax(logits, V);
        hist[n_prompt + s] = dense_tok[s];
        uint8_t want = 1;
        struct okv_batch b = {1, &dense_tok[s], &seq, &want, NULL};
        if ((st = okv_engine_forward(e, &b, logits)) != OKV_OK)
            goto done;
    }
    okv_engine_free(e);
    e = NULL;
    progress(prog, user, "fidelity: dense reference, %d prompt tokens + %d steps (%.1f s)", n_prompt, steps,
             okv_now() - t0);

    for (int k = 0; k < n_cfgs; k++) {
        const struct okv_eval_config *cfg = &cfgs[k];
        struct okv_eval_fid_cell *cell = &out[k];
        memset(cell, 0, sizeof *cell);
        cell->cfg = *cfg;
        cell->steps = steps;
        double tc = okv_now();
        bool recall = track_recall && cfg->kv_budget > 0 && cfg->predict != OKV_PREDICT_ORACLE;
        okv_drafter *dr = NULL;
        if ((st = make_engine(m, be, cfg, ctx, chunk, recall, &e)) != OKV_OK ||
            (st = make_drafter(m, be, cfg, NULL, ctx, chunk, &dr)) != OKV_OK ||
            (st = okv_engine_seq_create(e, &seq)) != OKV_OK ||
            (st = okv_engine_prefill(e, seq, prompt, n_prompt, chunk, logits)) != OKV_OK) {
            okv_drafter_free(dr);
            goto done;
        }
        okv_engine_stats_reset(e);
        int agree = 0;
        double kl = 0;
        struct okv_sampling greedy = {.temperature = 0, .top_k = 0, .top_p = 1};
        struct okv_rng rng;
        okv_rng_seed(&rng, 1);
        for (int s = 0; s < steps; s++) {
            okv_log_softmax(logits, V, lp);
            const float *r = ref_lp + (size_t)s * V;
            double d = 0;
            for (int i = 0; i < V; i++)
                d += exp((double)r[i]) * ((double)r[i] - (double)lp[i]);
            kl += d;
            agree += okv_argmax(logits, V) == dense_tok[s];
            /* the next step: dense's token, then drafted lookahead rows (their KV dropped after) */
            int32_t rows[1 + 4], seqs[1 + 4];
            uint8_t want[1 + 4] = {1, 0, 0, 0, 0}, draft[1 + 4] = {0};
            rows[0] = dense_tok[s];
            int nd = 0;
            if (dr) {
                const float *q;
                if ((st = okv_drafter_propose(dr, hist, n_prompt + s + 1, K, &greedy, &rng, rows + 1, &q, &nd)) !=
                    OKV_OK) {
                    okv_drafter_free(dr);
                    goto done;
                }
                okv_drafter_accept(dr, 0);   /* teacher forcing: the history goes on with dense's token */
            }
            for (int i = 0; i <= nd; i++) {
                seqs[i] = seq;
                draft[i] = i > 0;
            }
            int len0 = okv_engine_seq_len(e, seq);
            struct okv_batch b = {nd + 1, rows, seqs, want, draft};
            if ((st = okv_engine_forward(e, &b, logits)) != OKV_OK ||
                (nd > 0 && (st = okv_engine_seq_truncate(e, seq, len0 + 1)) != OKV_OK)) {
                okv_drafter_free(dr);
                goto done;
            }
        }
        struct okv_engine_stats es;
        okv_engine_stats_get(e, &es);
        cell->top1 = (double)agree / steps;
        cell->mean_kl = kl / steps;
        cell->recall = es.recall_total ? (double)es.recall_hits / (double)es.recall_total : -1;
        cell->fetch_kib_per_step = (double)es.fetch_bytes / 1024.0 / steps;
        cell->resident_in_time = es.units_selected ? (double)es.units_in_time / (double)es.units_selected : 1.0;
        cell->stall_ms_per_step = es.stall_s * 1e3 / steps;
        cell->device_bytes_peak = es.device_bytes_peak;
        cell->seconds = okv_now() - tc;
        okv_drafter_free(dr);
        okv_engine_free(e);
        e = NULL;
        progress(prog, user, "fidelity: budget %d %s: top-1 = dense %.3f, mean KL %.4f (%.1f s)", cfg->kv_budget,
                 cfg->kv_budget ? okv_eval_predict_name(cfg) : "(dense)", cell->top1, cell->mean_kl, cell->seconds);
    }
done:
    okv_engine_free(e);
    okv_free(ref_lp);
    okv_free(logits);
    okv_free(lp);
    okv_free(dense_tok);
    okv_free(hist);
    return st;
}
