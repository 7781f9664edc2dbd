/* Shared by test_tp (CPU ranks) and test_cuda_tp (GPU ranks): run a model on the
 * plain backend and under the tensor-parallel backend and compare the logits. */
#ifndef OKV_TESTS_TP_COMPARE_H
#define OKV_TESTS_TP_COMPARE_H

#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/kv.h"
#include "oasiskv/tp.h"
#include "synth_model.h"
#include "testutil.h"

#include <math.h>

#define PROMPT 150
#define GEN 24

static int32_t prompt[PROMPT];
static int32_t ref_tok[GEN];
static float ref_logits[GEN * 49152], tp_logits[GEN * 49152];
static int prefill_chunk = 16;   /* prompt tokens per forward pass (<= max_batch_tokens) */

/* Prefill in chunks of prefill_chunk, then GEN decode steps fed with forced tokens (NULL:
 * greedy, written to ref_tok); the logits of every step are kept. */
static void run(okv_engine *e, int vocab, const int32_t *forced, float *logits, struct okv_engine_stats *stats)
{
    int seq;
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "seq_create: %s", okv_last_error());
    int32_t seqs[PROMPT];
    uint8_t want[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        seqs[i] = seq;
    for (int at = 0; at < PROMPT; at += prefill_chunk) {
        int n = PROMPT - at < prefill_chunk ? PROMPT - at : prefill_chunk;
        memset(want, 0, sizeof want);
        want[n - 1] = at + n == PROMPT;
        struct okv_batch b = {n, prompt + at, seqs, want, NULL};
        CHECK(okv_engine_forward(e, &b, logits) == OKV_OK, "prefill: %s", okv_last_error());
    }
    for (int s = 0; s + 1 < GEN; s++) {
        int32_t tok = forced ? forced[s] : okv_argmax(logits + (size_t)s * vocab, vocab);
        if (!forced)
            ref_tok[s] = tok;
        want[0] = 1;
        struct okv_batch b = {1, &tok, seqs, want, NULL};
        float *lg = logits + (size_t)(s + 1) * vocab;
        if (forced) {   /* the sharded run samples on the backend too (greedy: its own argmax) */
            const struct okv_sampling greedy = {0};
            const double u = 0.5;
            int32_t picked = -1;
            CHECK(okv_engine_forward_sample(e, &b, &greedy, &u, &picked, lg) == OKV_OK, "decode: %s", okv_last_error());
            CHECK(picked == okv_argmax(lg, vocab), "step %d: sampled %d, argmax %d", s, picked, okv_argmax(lg, vocab));
        } else {
            CHECK(okv_engine_forward(e, &b, lg) == OKV_OK, "decode: %s", okv_last_error());
        }
    }
    if (stats)
        okv_engine_stats_get(e, stats);
    okv_engine_seq_free(e, seq);
}

/* max |a-b| over the run, relative to the largest |a| */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0, s = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d != d)
            return 1e9;
        m = d > m ? d : m;
        s = fabs(a[i]) > s ? fabs(a[i]) : s;
    }
    return m / s;
}

/* Steps whose argmax differs although the reference's top-1 margin exceeds
 * margin x max |logit|. */
static int argmax_mismatches(const float *a, const float *b, int vocab, float margin)
{
    int bad = 0;
    float scale = 0;
    for (size_t i = 0; i < (size_t)GEN * vocab; i++)
        scale = fabsf(a[i]) > scale ? fabsf(a[i]) : scale;
    for (int s = 0; s < GEN; s++) {
        const float *x = a + (size_t)s * vocab;
        int i = okv_argmax(x, vocab);
        float second = -1e30f;
        for (int j = 0; j < vocab; j++)
            if (j != i && x[j] > second)
                second = x[j];
        if (x[i] - second > margin * scale && okv_argmax(b + (size_t)s * vocab, vocab) != i)
            bad++;
    }
    return bad;
}

/* The plain backend of kind device against the tensor-parallel one at TP = 1 ..
 * max_n (where the model splits): TP=1 bit for bit, more ranks within tol (max
 * relative difference of the logits) and the same greedy token wherever the
 * reference's top-1 margin exceeds margin x max |logit|. Without check_multi, runs
 * of more ranks are reported, not checked (a small sparse budget on the GPU: its
 * selection can differ on near-ties once the sums are reordered). */
static void compare_on(const char *device, int max_n, double tol, float margin, bool check_multi, const struct okv_model *m,
                       const struct okv_engine_params *ep, const char *what)
{
    const int vocab = m->cfg.vocab_size;
    okv_backend *cpu = NULL;
    struct okv_backend_params bp = {.n_threads = 1};
    CHECK(okv_backend_create(device, &bp, &cpu) == OKV_OK, "%s: %s", device, okv_last_error());
    if (!cpu)
        return;
    okv_engine *e = NULL;
    CHECK(okv_engine_create(m, cpu, ep, &e) == OKV_OK, "%s: engine: %s", what, okv_last_error());
    if (!e) {
        okv_backend_free(cpu);
        return;
    }
    struct okv_engine_stats ref_st, st;
    run(e, vocab, NULL, ref_logits, &ref_st);
    okv_engine_free(e);
    okv_backend_free(cpu);

    for (int n = 1; n <= max_n; n++) {
        if (m->cfg.n_heads % n || (m->cfg.n_kv_heads % n && n % m->cfg.n_kv_heads))
            continue;
        okv_backend *tp = NULL;
        CHECK(okv_backend_create_tp(device, &bp, n, &m->cfg, &tp) == OKV_OK, "%s tp%d: %s", what, n, okv_last_error());
        if (!tp)
            continue;
        CHECK(okv_backend_shards(tp) == n, "%s: shards %d", what, okv_backend_shards(tp));
        okv_engine *te = NULL;
        CHECK(okv_engine_create(m, tp, ep, &te) == OKV_OK, "%s tp%d: engine: %s", what, n, okv_last_error());
        if (te) {
            memset(tp_logits, 0xff, sizeof tp_logits);   /* NaN: an unwritten logit fails */
            run(te, vocab, ref_tok, tp_logits, &st);
            size_t cnt = (size_t)GEN * vocab;
            double d = rel_diff(ref_logits, tp_logits, cnt);
            int flips = argmax_mismatches(ref_logits, tp_logits, vocab, margin);
            if (n == 1) {
                CHECK(!memcmp(ref_logits, tp_logits, sizeof(float) * cnt), "%s: TP=1 differs from the plain backend (rel %.3g)",
                      what, d);
                CHECK(st.units_fetched == ref_st.units_fetched, "%s: TP=1 fetched %lld units, the plain engine %lld", what,
                      (long long)st.units_fetched, (long long)ref_st.units_fetched);
            } else if (check_multi) {
                CHECK(d < tol, "%s: TP=%d logits differ by %.3g (relative)", what, n, d);
                CHECK(flips == 0, "%s: TP=%d changes %d clear greedy tokens", what, n, flips);
                CHECK(st.units_fetched == ref_st.units_fetched, "%s: TP=%d fetched %lld units, the plain engine %lld", what, n,
                      (long long)st.units_fetched, (long long)ref_st.units_fetched);
            }
            /* device bytes are one device's: a device holds n_kv / n heads (1 when replicated) */
            const int nkv = m->cfg.n_kv_heads, dev_heads = nkv >= n ? nkv / n : 1;
            CHECK(st.device_bytes_peak * (size_t)nkv == ref_st.device_bytes_peak * (size_t)dev_heads,
                  "%s: TP=%d device bytes peak %zu, plain %zu", what, n, st.device_bytes_peak, ref_st.device_bytes_peak);
            CHECK(st.host_bytes_peak * (size_t)nkv == ref_st.host_bytes_peak * (size_t)(dev_heads * n),
                  "%s: TP=%d host bytes peak %zu, plain %zu", what, n, st.host_bytes_peak, ref_st.host_bytes_peak);
            CHECK(okv_kv_used_slots(okv_engine_kv(te)) == 0, "%s: TP=%d slots leaked", what, n);
            printf("%-5s %-34s TP=%d  max rel diff %.2e  clear flips %d  units fetched %lld (plain %lld)%s\n", device, what, n, d,
                   flips, (long long)st.units_fetched, (long long)ref_st.units_fetched, n > 1 && !check_multi ? "  [reported]" : "");
            okv_engine_free(te);
        }
        okv_backend_free(tp);
    }
}

/* One engine configuration of compare_synth. */
struct tp_case {
    const char *name;
    struct okv_engine_params ep;
    bool check_multi;
};

/* compare_on over the synthetic Llama, Qwen2 (bias) and Qwen3 (q/k norm) models, each
 * with a fresh random prompt, for every case. */
static void compare_synth(const char *device, int max_n, double tol, float margin, const struct tp_case *cases, int n_cases,
                          struct okv_rng *rng)
{
    const enum okv_arch archs[] = {OKV_ARCH_LLAMA, OKV_ARCH_QWEN2, OKV_ARCH_QWEN3};
    const char *names[] = {"llama", "qwen2 (bias)", "qwen3 (q/k norm)"};
    for (size_t a = 0; a < 3; a++) {
        struct synth_model sm;
        synth_model_init(&sm, archs[a], 100 + a);
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(okv_rng_next(rng) % (uint64_t)sm.m.cfg.vocab_size);
        for (int c = 0; c < n_cases; c++) {
            char what[96];
            snprintf(what, sizeof what, "%s %s", names[a], cases[c].name);
            compare_on(device, max_n, tol, margin, cases[c].check_multi, &sm.m, &cases[c].ep, what);
        }
        synth_model_free(&sm);
    }
}
#endif
