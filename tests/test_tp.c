/* label: unit */
/* Tensor parallelism's sharding math on the CPU: the shards of a model run in one
 * process (N CPU rank backends under the tensor-parallel backend, partial sums
 * combined by the host-staged communicator) and must give the logits of the
 * unsharded engine:
 *  - TP=1 through the wrapper equals the plain backend bit for bit;
 *  - TP=2 (KV heads split) and TP=4 (KV heads replicated: 2 KV heads, 4 ranks)
 *    agree within float rounding (the all-reduce sums in another order) for Llama
 *    (interleaved RoPE, tied head split by vocabulary), Qwen2 (q/k/v biases) and
 *    Qwen3 (q/k norm), and for a Q4_0 GGUF checkpoint (quantized rows sliced in
 *    place, columns converted) and for SmolLM2 at TP=3 (9 heads, 3 KV heads);
 *  - sparse attention with a real budget selects and fetches the same blocks (each
 *    rank selects for its own KV heads from its own host tier) and gives the same
 *    logits;
 *  - a model that cannot be split is a clear error; nothing leaks. */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/tp.h"
#include "synth_model.h"
#include "testutil.h"

#define PROMPT 150
#define GEN 24

static int32_t prompt[PROMPT];
static int32_t ref_tok[GEN];
static float ref_logits[GEN * 49152], tp_logits[GEN * 49152];

/* Prefill in chunks of 16, then GEN decode steps fed with forced tokens (NULL:
 * greedy, written to ref_tok); the logits of every step are kept. */
static void run(okv_engine *e, int vocab, const int32_t *forced, float *logits, struct okv_engine_stats *stats)
{
    int seq;
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "seq_create: %s", okv_last_error());
    int32_t seqs[16];
    uint8_t want[16];
    for (int i = 0; i < 16; i++)
        seqs[i] = seq;
    for (int at = 0; at < PROMPT; at += 16) {
        int n = PROMPT - at < 16 ? PROMPT - at : 16;
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
        CHECK(okv_engine_forward(e, &b, logits + (size_t)(s + 1) * vocab) == OKV_OK, "decode: %s", okv_last_error());
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

/* Same argmax wherever the reference's top-1 margin exceeds the difference seen. */
static int argmax_mismatches(const float *a, const float *b, int vocab)
{
    int bad = 0;
    for (int s = 0; s < GEN; s++) {
        const float *x = a + (size_t)s * vocab;
        int i = okv_argmax(x, vocab);
        float second = -1e30f;
        for (int j = 0; j < vocab; j++)
            if (j != i && x[j] > second)
                second = x[j];
        if (x[i] - second > 1e-3f && okv_argmax(b + (size_t)s * vocab, vocab) != i)
            bad++;
    }
    return bad;
}

static void compare(const struct okv_model *m, const struct okv_engine_params *ep, const char *what)
{
    const int vocab = m->cfg.vocab_size;
    okv_backend *cpu = NULL;
    struct okv_backend_params bp = {.n_threads = 1};
    CHECK(okv_backend_cpu_create(&bp, &cpu) == OKV_OK, "cpu: %s", okv_last_error());
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

    for (int n = 1; n <= 4; n++) {
        if (m->cfg.n_heads % n || (m->cfg.n_kv_heads % n && n % m->cfg.n_kv_heads))
            continue;
        okv_backend *tp = NULL;
        CHECK(okv_backend_create_tp("cpu", &bp, n, &m->cfg, &tp) == OKV_OK, "%s tp%d: %s", what, n, okv_last_error());
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
            if (n == 1)
                CHECK(!memcmp(ref_logits, tp_logits, sizeof(float) * cnt), "%s: TP=1 differs from the plain backend (rel %.3g)",
                      what, d);
            else
                CHECK(d < 1e-5, "%s: TP=%d logits differ by %.3g (relative)", what, n, d);
            CHECK(argmax_mismatches(ref_logits, tp_logits, vocab) == 0, "%s: TP=%d changes a clear greedy token", what, n);
            CHECK(st.units_fetched == ref_st.units_fetched, "%s: TP=%d fetched %lld units, the plain engine %lld", what, n,
                  (long long)st.units_fetched, (long long)ref_st.units_fetched);
            CHECK(okv_kv_used_slots(okv_engine_kv(te)) == 0, "%s: TP=%d slots leaked", what, n);
            printf("%-34s TP=%d  max rel diff %.2e  units fetched %lld\n", what, n, d, (long long)st.units_fetched);
            okv_engine_free(te);
        }
        okv_backend_free(tp);
    }
}

int main(void)
{
    struct okv_rng rng;
    okv_rng_seed(&rng, 11);
    const enum okv_arch archs[] = {OKV_ARCH_LLAMA, OKV_ARCH_QWEN2, OKV_ARCH_QWEN3};
    const char *names[] = {"llama", "qwen2 (bias)", "qwen3 (q/k norm)"};
    for (size_t a = 0; a < 3; a++) {
        struct synth_model sm;
        synth_model_init(&sm, archs[a], 100 + a);
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(okv_rng_next(&rng) % (uint64_t)sm.m.cfg.vocab_size);
        char what[96];
        struct okv_engine_params dense = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32};
        snprintf(what, sizeof what, "%s dense", names[a]);
        compare(&sm.m, &dense, what);
        /* 38 blocks of context, budget 10 blocks: 1 sink + 4 window + 5 selected */
        struct okv_engine_params sparse = {.block_size = 4, .max_ctx = 512, .max_batch_tokens = 32, .kv_budget = 40,
                                           .predict = OKV_PREDICT_CURRENT};
        snprintf(what, sizeof what, "%s sparse budget 40", names[a]);
        compare(&sm.m, &sparse, what);
        sparse.cache_factor = 2.0f;
        snprintf(what, sizeof what, "%s sparse budget 40 cache x2", names[a]);
        compare(&sm.m, &sparse, what);
        synth_model_free(&sm);
    }

    /* a quantized checkpoint */
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/models/llama_gqa.Q4_0.gguf", tu_src_dir());
    struct okv_model *m = NULL;
    if (okv_model_load(path, &m) == OKV_OK) {
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(okv_rng_next(&rng) % (uint64_t)m->cfg.vocab_size);
        struct okv_engine_params dense = {.block_size = 16, .max_ctx = 256, .max_batch_tokens = 32};
        compare(m, &dense, "llama_gqa Q4_0 dense");
        okv_model_free(m);
    } else {
        CHECK(0, "load %s: %s", path, okv_last_error());
    }

    /* SmolLM2 (9 heads, 3 KV heads: TP=3), when the default model is there */
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", tu_src_dir());
    if (okv_model_load(path, &m) == OKV_OK) {
        for (int i = 0; i < PROMPT; i++)
            prompt[i] = (int32_t)(1000 + okv_rng_next(&rng) % 20000);
        struct okv_engine_params dense = {.block_size = 16, .max_ctx = 512, .max_batch_tokens = 32};
        compare(m, &dense, "SmolLM2-135M Q4_1 dense");
        okv_model_free(m);
    } else {
        printf("SKIP SmolLM2 part: %s\n", okv_last_error());
    }

    /* models that cannot be split */
    {
        struct synth_model sm;
        synth_model_init(&sm, OKV_ARCH_LLAMA, 5);
        okv_backend *tp = NULL;
        struct okv_backend_params bp = {.n_threads = 1};
        CHECK(okv_backend_create_tp("cpu", &bp, 3, &sm.m.cfg, &tp) == OKV_ERR_UNSUPPORTED && strstr(okv_last_error(), "heads"),
              "TP=3 of 4 heads: %s", okv_last_error());
        CHECK(okv_backend_create_tp("cpu", &bp, 0, &sm.m.cfg, &tp) == OKV_ERR_INVALID_ARG, "TP=0: %s", okv_last_error());
        CHECK(okv_backend_create_tp("cuda-nope", &bp, 2, &sm.m.cfg, &tp) != OKV_OK, "unknown device accepted");
        synth_model_free(&sm);
    }
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_tp");
}
