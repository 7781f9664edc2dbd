/* label: cuda */
/* Segment graphs of the CUDA backend (cuda_graph.cu): the same forwards with graphs off
 * and on give the same logits, and graphs are captured and replayed.
 *
 * On three tiny reference checkpoints (plain GQA Llama; Qwen2 with q/k/v biases and tied
 * embeddings; Qwen3 with q/k norms: every pure op kind), one GPU backend runs a schedule
 * twice, graphs off then on: sequence A's prompt in chunks, A decoding alone, B's
 * prompt prefilled beside A's decode rows, A and B decoding, C joining (a batch of 3),
 * then A alone again (its runs captured earlier must replay), and D's prompt beside
 * their decode rows, a batch larger than any before (the bf16 activation scratch grows:
 * every graph is dropped), then all four decoding. Every row's
 * logits are kept. Dense and sparse (budget 32 of up to ~120 tokens, device residency:
 * selection, install and gather run between the graph launches).
 *
 * Tolerance: none. A graph launches the same kernels with the same arguments as the eager
 * path, cuBLAS included, so the logits must be bitwise equal (max |on - off| == 0).
 * Checked besides: with graphs on, graphs were captured and launched (at least one launch
 * per layer and decode step once warm); with graphs off, none. Then run_large: prefill-sized
 * runs are not captured, and padded row counts match exact ones. Skips (77) without a GPU. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "backend/cuda/cuda_bench.h"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"
#include "testutil.h"

#include <cuda_runtime_api.h>
#include <math.h>

#define MAX_ROWS 64

struct sched {
    float *logits;   /* appended per forward: rows x vocab */
    size_t n, cap;   /* floats */
    int forwards;
};

static uint32_t rng_next(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* one forward of the rows (tokens drawn from the generator), all rows' logits kept */
static int fwd(okv_engine *e, int vocab, uint32_t *rs, const int32_t *seq, int n, struct sched *out)
{
    int32_t tok[MAX_ROWS];
    uint8_t want[MAX_ROWS];
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)(rng_next(rs) % (uint32_t)vocab);
        want[i] = 1;
    }
    if (out->n + (size_t)n * vocab > out->cap) {
        out->cap = (out->n + (size_t)n * vocab) * 2;
        out->logits = realloc(out->logits, sizeof(float) * out->cap);
    }
    struct okv_batch b = {n, tok, seq, want, NULL};
    enum okv_status st = okv_engine_forward(e, &b, out->logits + out->n);
    CHECK(st == OKV_OK, "forward %d (%d rows): %s", out->forwards, n, okv_last_error());
    if (st != OKV_OK)
        return -1;
    out->n += (size_t)n * vocab;
    out->forwards++;
    return 0;
}

/* rows of sequence s: count tokens */
static int rows(int32_t *seq, int at, int s, int count)
{
    for (int i = 0; i < count; i++)
        seq[at + i] = s;
    return at + count;
}

static int run_schedule(okv_engine *e, int vocab, struct sched *out)
{
    uint32_t rs = 12345;
    int a, b, c, d;
    if (okv_engine_seq_create(e, &a) != OKV_OK || okv_engine_seq_create(e, &b) != OKV_OK ||
        okv_engine_seq_create(e, &c) != OKV_OK || okv_engine_seq_create(e, &d) != OKV_OK) {
        CHECK(0, "seq_create: %s", okv_last_error());
        return -1;
    }
    int32_t seq[MAX_ROWS];
    int n, rc = 0;
    for (int i = 0; i < 3 && !rc; i++)   /* A: 48 prompt tokens */
        rc = fwd(e, vocab, &rs, seq, rows(seq, 0, a, 16), out);
    for (int i = 0; i < 12 && !rc; i++)  /* A alone */
        rc = fwd(e, vocab, &rs, seq, rows(seq, 0, a, 1), out);
    if (!rc) {                           /* B's prompt beside A's decode */
        n = rows(seq, 0, a, 1);
        rc = fwd(e, vocab, &rs, seq, rows(seq, n, b, 15), out);
    }
    for (int i = 0; i < 10 && !rc; i++) {   /* A and B */
        n = rows(seq, 0, a, 1);
        rc = fwd(e, vocab, &rs, seq, rows(seq, n, b, 1), out);
    }
    if (!rc) {                           /* C joins */
        n = rows(seq, 0, a, 1);
        n = rows(seq, n, b, 1);
        rc = fwd(e, vocab, &rs, seq, rows(seq, n, c, 14), out);
    }
    for (int i = 0; i < 10 && !rc; i++) {   /* A, B, C */
        n = rows(seq, 0, a, 1);
        n = rows(seq, n, b, 1);
        rc = fwd(e, vocab, &rs, seq, rows(seq, n, c, 1), out);
    }
    for (int i = 0; i < 8 && !rc; i++)   /* A alone again: earlier graphs replay */
        rc = fwd(e, vocab, &rs, seq, rows(seq, 0, a, 1), out);
    if (!rc) {                           /* D's prompt: a larger batch than any before, the scratch grows */
        n = rows(seq, 0, a, 1);
        n = rows(seq, n, b, 1);
        n = rows(seq, n, c, 1);
        rc = fwd(e, vocab, &rs, seq, rows(seq, n, d, 40), out);
    }
    for (int i = 0; i < 6 && !rc; i++) {   /* A, B, C, D */
        n = rows(seq, 0, a, 1);
        n = rows(seq, n, b, 1);
        n = rows(seq, n, c, 1);
        rc = fwd(e, vocab, &rs, seq, rows(seq, n, d, 1), out);
    }
    okv_engine_seq_free(e, a);
    okv_engine_seq_free(e, b);
    okv_engine_seq_free(e, c);
    okv_engine_seq_free(e, d);
    return rc;
}

static void run_model(const char *name, const char *path, okv_backend *gpu)
{
    struct okv_model *m = NULL;
    enum okv_status st = okv_model_load(path, &m);
    CHECK(st == OKV_OK, "%s: load: %s", name, okv_last_error());
    if (st != OKV_OK)
        return;
    const int vocab = m->cfg.vocab_size;
    struct {
        const char *what;
        struct okv_engine_params ep;
    } runs[] = {
        {"dense", {.block_size = 16, .max_seqs = 4, .max_ctx = 256, .max_batch_tokens = 64}},
        {"sparse 32", {.block_size = 4, .max_seqs = 4, .max_ctx = 256, .max_batch_tokens = 64, .kv_budget = 32}},
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        struct sched res[2] = {{0}};
        struct okv_cuda_graph_info gi[2];
        for (int on = 0; on < 2; on++) {
            CHECK(okv_cuda_set_graphs(gpu, on) == OKV_OK, "set graphs: %s", okv_last_error());
            struct okv_cuda_graph_info before;
            okv_cuda_graph_info(gpu, &before);
            okv_engine *e = NULL;
            st = okv_engine_create(m, gpu, &runs[r].ep, &e);
            CHECK(st == OKV_OK, "%s %s: engine: %s", name, runs[r].what, okv_last_error());
            if (st == OKV_OK)
                run_schedule(e, vocab, &res[on]);
            okv_engine_free(e);
            okv_cuda_graph_info(gpu, &gi[on]);
            gi[on].launched -= before.launched;
            gi[on].captured -= before.captured;
            gi[on].eager_runs -= before.eager_runs;
        }
        double max_diff = 0;
        bool same_len = res[0].n == res[1].n && res[0].n > 0;
        CHECK(same_len, "%s %s: %zu logits with graphs off, %zu on", name, runs[r].what, res[0].n, res[1].n);
        if (same_len)
            for (size_t i = 0; i < res[0].n; i++) {
                double d = fabs((double)res[0].logits[i] - (double)res[1].logits[i]);
                if (!(d <= max_diff))   /* NaN counts */
                    max_diff = isnan(d) ? INFINITY : d;
            }
        const int decode_steps = 12 + 10 + 10 + 8 + 6;
        printf("  %-22s %-10s %3d forwards: max |on - off| %.3g; on: %lld graph launches, %lld captured, %lld eager runs; "
               "off: %lld launches\n",
               name, runs[r].what, res[1].forwards, max_diff, gi[1].launched, gi[1].captured, gi[1].eager_runs, gi[0].launched);
        CHECK(max_diff == 0, "%s %s: graphs change the logits by %.3g", name, runs[r].what, max_diff);
        CHECK(gi[0].launched == 0 && gi[0].captured == 0, "%s %s: graphs off, yet %lld launched", name, runs[r].what,
              gi[0].launched);
        CHECK(gi[1].captured > 0 && gi[1].launched >= (long long)(decode_steps / 2) * m->cfg.n_layers,
              "%s %s: graphs on: %lld launched, %lld captured (%d layers, %d decode steps)", name, runs[r].what,
              gi[1].launched, gi[1].captured, m->cfg.n_layers, decode_steps);
        free(res[0].logits);
        free(res[1].logits);
    }
    okv_model_free(m);
}

/* Prefill-sized runs (more than 256 rows) are launched without being remembered: three
 * 300-row chunks with graphs on capture nothing, and their logits equal the same chunks'
 * with graphs off. And the padded row counts of decode-sized batches (5 to 256 rows) give
 * the logits of exact counts within cuBLAS's reordering (OKV_PAD_ROWS=0). */
static void run_large(const char *path, okv_backend *gpu)
{
    struct okv_model *m = NULL;
    if (okv_model_load(path, &m) != OKV_OK) {
        CHECK(0, "load: %s", okv_last_error());
        return;
    }
    const int vocab = m->cfg.vocab_size, big = 300;
    const struct okv_engine_params ep = {.block_size = 16, .max_seqs = 2, .max_ctx = 1024, .max_batch_tokens = 512};
    float *lg[2];
    struct okv_cuda_graph_info gi[2];
    int32_t *tok = malloc(sizeof(int32_t) * big), *seq = malloc(sizeof(int32_t) * big);
    uint8_t *want = malloc(big);
    for (int on = 0; on < 2; on++) {
        lg[on] = malloc(sizeof(float) * (size_t)3 * big * vocab);
        CHECK(okv_cuda_set_graphs(gpu, on) == OKV_OK, "set graphs: %s", okv_last_error());
        struct okv_cuda_graph_info before;
        okv_cuda_graph_info(gpu, &before);
        okv_engine *e = NULL;
        int s0 = -1, s1 = -1;
        enum okv_status st = okv_engine_create(m, gpu, &ep, &e);
        if (st == OKV_OK && (st = okv_engine_seq_create(e, &s0)) == OKV_OK)
            st = okv_engine_seq_create(e, &s1);
        uint32_t rs = 777;
        for (int f = 0; f < 3 && st == OKV_OK; f++) {   /* A's first chunk, B's, A's second */
            for (int i = 0; i < big; i++) {
                tok[i] = (int32_t)(rng_next(&rs) % (uint32_t)vocab);
                seq[i] = f == 1 ? s1 : s0;
                want[i] = 1;
            }
            struct okv_batch b = {big, tok, seq, want, NULL};
            st = okv_engine_forward(e, &b, lg[on] + (size_t)f * big * vocab);
        }
        CHECK(st == OKV_OK, "300-row forwards: %s", okv_last_error());
        okv_engine_free(e);
        okv_cuda_graph_info(gpu, &gi[on]);
        gi[on].captured -= before.captured;
        gi[on].eager_runs -= before.eager_runs;
    }
    double md = 0;
    for (size_t i = 0; i < (size_t)3 * big * vocab; i++)
        md = fmax(md, fabs((double)lg[0][i] - lg[1][i]));
    printf("  llama_gqa, 3 chunks of %d rows: max |on - off| %.3g; on: %lld captured, %lld eager runs\n", big, md,
           gi[1].captured, gi[1].eager_runs);
    CHECK(md == 0, "300-row chunks: graphs on and off differ by %g", md);
    CHECK(gi[1].captured == 0 && gi[1].eager_runs > 0, "300-row chunks: %lld runs captured (none expected), %lld eager",
          gi[1].captured, gi[1].eager_runs);
    /* decode-sized batches: padded (default) against exact row counts (fresh backends, graphs on) */
    const int ns = 4, bsz[] = {5, 9, 13, 37, 70, 111};
    float *pl[2];
    size_t n_l = 0;
    for (int pad = 0; pad < 2; pad++) {
        setenv("OKV_PAD_ROWS", pad ? "1" : "0", 1);
        okv_backend *b2 = NULL;   /* the setting is read when a context starts */
        struct okv_backend_params bp = {.n_threads = 2};
        enum okv_status st = okv_backend_create("cuda", &bp, &b2);
        okv_engine *e = NULL;
        if (st == OKV_OK)
            st = okv_engine_create(m, b2, &ep, &e);
        int sq[4];
        for (int i = 0; i < ns && st == OKV_OK; i++)
            st = okv_engine_seq_create(e, &sq[i]);
        uint32_t rs = 99;
        size_t at = 0;
        pl[pad] = malloc(sizeof(float) * (size_t)(5 + 9 + 13 + 37 + 70 + 111) * vocab);
        for (size_t f = 0; f < sizeof bsz / sizeof bsz[0] && st == OKV_OK; f++) {
            for (int i = 0; i < bsz[f]; i++) {
                tok[i] = (int32_t)(rng_next(&rs) % (uint32_t)vocab);
                seq[i] = sq[i * ns / bsz[f]];   /* a sequence's rows are contiguous */
                want[i] = 1;
            }
            struct okv_batch b = {bsz[f], tok, seq, want, NULL};
            st = okv_engine_forward(e, &b, pl[pad] + at);
            at += (size_t)bsz[f] * vocab;
        }
        CHECK(st == OKV_OK, "padded forwards (OKV_PAD_ROWS=%d): %s", pad, okv_last_error());
        n_l = at;
        okv_engine_free(e);
        okv_backend_free(b2);
    }
    unsetenv("OKV_PAD_ROWS");
    double mx = 0, rel = 0;
    for (size_t i = 0; i < n_l; i++) {
        mx = fmax(mx, fabs((double)pl[1][i]));
        rel = fmax(rel, fabs((double)pl[1][i] - pl[0][i]));
    }
    rel = mx > 0 ? rel / mx : rel;
    printf("  llama_gqa, batches of 5-111 rows: padded against exact row counts: max diff %.3g of the largest logit\n", rel);
    CHECK(rel < 2e-3, "padded row counts change the logits by %g of the largest", rel);
    free(pl[0]);
    free(pl[1]);
    free(lg[0]);
    free(lg[1]);
    free(tok);
    free(seq);
    free(want);
    okv_model_free(m);
}

int main(void)
{
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0) {
        printf("test_cuda_graph: skipped: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    okv_backend *gpu = NULL;
    struct okv_backend_params bp = {.n_threads = 2};
    if (okv_backend_create("cuda", &bp, &gpu) != OKV_OK) {
        fprintf(stderr, "backend: %s\n", okv_last_error());
        return 1;
    }
    const char *models[] = {"llama_gqa", "qwen2_bias_tied", "qwen3_headdim"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/models/%s", tu_src_dir(), models[i]);
        run_model(models[i], path, gpu);
    }
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/models/llama_gqa", tu_src_dir());
        run_large(path, gpu);
    }
    okv_backend_free(gpu);
    CHECK(okv_alloc_live_count(OKV_TAG_BACKEND) == 0, "backend allocations leaked");
    CHECK(okv_alloc_live_count(OKV_TAG_ENGINE) == 0, "engine allocations leaked");
    return tu_finish("test_cuda_graph");
}
