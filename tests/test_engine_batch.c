/* label: unit */
/* The paged KV cache and the flat batch: one prompt prefilled whole, in chunks, or
 * one token at a time, and several sequences interleaved in one batch (prefill
 * chunks and decode rows together), must all give the same logits at every
 * position; capacity and context errors leave the state unchanged; every slot is
 * free at the end. */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "synth_model.h"
#include "testutil.h"

#define NSEQ 4
#define LEN 70
#define V 200

static float ref_logits[NSEQ][LEN][V];
static int32_t toks[NSEQ][LEN];

/* Whole-sequence forward with logits for every row. */
static void solo(okv_engine *e, int s, int chunk, float out[LEN][V])
{
    int seq;
    okv_engine_seq_create(e, &seq);
    int32_t seqs[LEN];
    uint8_t want[LEN];
    for (int i = 0; i < LEN; i++) {
        seqs[i] = seq;
        want[i] = 1;
    }
    for (int at = 0; at < LEN; at += chunk) {
        int n = LEN - at < chunk ? LEN - at : chunk;
        struct okv_batch b = {n, toks[s] + at, seqs, want, NULL};
        enum okv_status st = okv_engine_forward(e, &b, &out[at][0]);
        CHECK(st == OKV_OK, "forward: %s", okv_last_error());
    }
    okv_engine_seq_free(e, seq);
}

static double maxdiff(float a[LEN][V], float b[LEN][V])
{
    double m = 0;
    for (int i = 0; i < LEN; i++)
        for (int j = 0; j < V; j++) {
            double d = fabs((double)a[i][j] - b[i][j]);
            if (d > m || d != d)
                m = d != d ? 1e9 : d;
        }
    return m;
}

static float tmp[LEN][V];

static void test_arch(enum okv_arch arch, okv_backend *be)
{
    struct synth_model sm;
    synth_model_init(&sm, arch, 42 + arch);
    struct okv_rng rng;
    okv_rng_seed(&rng, 7);
    for (int s = 0; s < NSEQ; s++)
        for (int i = 0; i < LEN; i++)
            toks[s][i] = (int32_t)(okv_rng_next(&rng) % V);

    struct okv_engine_params ep = {.block_size = 16, .kv_slots = 30, .max_batch_tokens = 96, .max_ctx = 256};
    okv_engine *e = NULL;
    CHECK(okv_engine_create(&sm.m, be, &ep, &e) == OKV_OK, "%s", okv_last_error());
    if (!e)
        return;

    for (int s = 0; s < NSEQ; s++)
        solo(e, s, 96, ref_logits[s]);
    /* chunked prefill and token-at-a-time decode */
    const int chunks[] = {1, 5, 16, 33};
    for (int c = 0; c < 4; c++) {
        solo(e, 0, chunks[c], tmp);
        double d = maxdiff(tmp, ref_logits[0]);
        CHECK(d < 1e-4, "arch %d chunk %d: max diff %.3g", arch, chunks[c], d);
        int agree = 0;
        for (int i = 0; i < LEN; i++)
            agree += okv_argmax(tmp[i], V) == okv_argmax(ref_logits[0][i], V);
        CHECK(agree == LEN, "arch %d chunk %d: argmax agrees at %d/%d positions", arch, chunks[c], agree, LEN);
    }

    /* interleaved: each step takes a random number of next tokens from each live
     * sequence, in one flat batch */
    int seq[NSEQ], done[NSEQ] = {0};
    for (int s = 0; s < NSEQ; s++)
        okv_engine_seq_create(e, &seq[s]);
    static float out[96][V];
    double worst = 0;
    for (int step = 0; step < 200; step++) {
        int32_t bt[96], bs[96], bsrc[96], bpos[96];
        uint8_t want[96];
        int n = 0;
        for (int s = 0; s < NSEQ; s++) {
            int k = 1 + (int)(okv_rng_next(&rng) % 12);
            if (s == step % NSEQ)
                k = 1;   /* a decode-like row every step */
            for (int i = 0; i < k && done[s] < LEN && n < 96; i++) {
                bt[n] = toks[s][done[s]];
                bs[n] = seq[s];
                bsrc[n] = s;
                bpos[n] = done[s];
                want[n] = 1;
                n++;
                done[s]++;
            }
        }
        if (n == 0)
            break;
        struct okv_batch b = {n, bt, bs, want, NULL};
        enum okv_status st = okv_engine_forward(e, &b, &out[0][0]);
        CHECK(st == OKV_OK, "interleaved forward: %s", okv_last_error());
        for (int r = 0; r < n; r++)
            for (int j = 0; j < V; j++) {
                double d = fabs((double)out[r][j] - ref_logits[bsrc[r]][bpos[r]][j]);
                if (d > worst)
                    worst = d;
            }
    }
    for (int s = 0; s < NSEQ; s++)
        CHECK(done[s] == LEN, "sequence %d only got %d tokens", s, done[s]);
    CHECK(worst < 1e-4, "arch %d interleaved batch: max diff %.3g", arch, worst);
    printf("  arch %d: interleaved batch max diff %.2e\n", arch, worst);

    /* capacity: 4 sequences of 70 tokens use 20 of 30 slots; 192 more tokens do not fit */
    int used = okv_kv_used_slots(okv_engine_kv(e));
    CHECK(used == NSEQ * 5, "used slots %d", used);
    int big;
    okv_engine_seq_create(e, &big);
    int32_t many[96], ms[96];
    uint8_t mw[96] = {0};
    for (int i = 0; i < 96; i++) {
        many[i] = i % V;
        ms[i] = big;
    }
    enum okv_status st = OKV_OK;
    int rounds = 0;
    for (; rounds < 10 && st == OKV_OK; rounds++) {
        struct okv_batch b = {96, many, ms, mw, NULL};
        st = okv_engine_forward(e, &b, NULL);
    }
    CHECK(st == OKV_ERR_NO_KV_SPACE, "expected no KV space, got %s", okv_status_str(st));
    CHECK(strlen(okv_last_error()) > 0, "no message");
    CHECK(okv_engine_seq_len(e, big) == 96 * (rounds - 1), "length changed on failure: %d", okv_engine_seq_len(e, big));
    okv_engine_seq_free(e, big);
    /* context limit */
    int c2;
    okv_engine_seq_create(e, &c2);
    for (int i = 0; i < 96; i++)
        ms[i] = c2;
    struct okv_batch b2 = {96, many, ms, mw, NULL};
    CHECK(okv_engine_forward(e, &b2, NULL) == OKV_OK, "%s", okv_last_error());
    okv_engine_seq_free(e, seq[0]);
    okv_engine_seq_free(e, seq[1]);
    st = OKV_OK;
    for (int r = 0; r < 3 && st == OKV_OK; r++)
        st = okv_engine_forward(e, &b2, NULL);
    CHECK(st == OKV_ERR_CONTEXT, "expected context error, got %s", okv_status_str(st));
    /* bad token id, non-contiguous rows, unknown sequence */
    int32_t bad = V + 5;
    int32_t one = c2;
    uint8_t w1 = 1;
    struct okv_batch b3 = {1, &bad, &one, &w1, NULL};
    CHECK(okv_engine_forward(e, &b3, tmp[0]) == OKV_ERR_INVALID_ARG, "bad token accepted");
    int32_t t3[3] = {1, 2, 3}, s3[3] = {c2, seq[2], c2};
    uint8_t w3[3] = {0};
    struct okv_batch b4 = {3, t3, s3, w3, NULL};
    CHECK(okv_engine_forward(e, &b4, NULL) == OKV_ERR_INVALID_ARG, "non-contiguous rows accepted");
    int32_t s5 = 999;
    struct okv_batch b5 = {1, t3, &s5, w3, NULL};
    CHECK(okv_engine_forward(e, &b5, NULL) == OKV_ERR_INVALID_ARG, "unknown sequence accepted");
    okv_engine_seq_free(e, c2);
    okv_engine_seq_free(e, seq[2]);
    okv_engine_seq_free(e, seq[3]);
    CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0, "slots leaked: %d", okv_kv_used_slots(okv_engine_kv(e)));
    okv_engine_free(e);
    synth_model_free(&sm);
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
    okv_backend_free(be);
    for (int t = 0; t < OKV_TAG_COUNT; t++)
        CHECK(okv_alloc_live_count(t) == 0, "tag %d: %lld allocations live", t, (long long)okv_alloc_live_count(t));
    return tu_finish("test_engine_batch");
}
