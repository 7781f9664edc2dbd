/* bench_sparse: fidelity and traffic of OasisKV's selection against dense decoding
 * on a real model and a long real text.
 *
 *   bench_sparse [-m MODEL] [--text FILE] [--prompt-tokens P] [--steps N]
 *                [--budgets 256,512,1024,2048] [--modes current,lookahead,oracle]
 *                [--threads T] [--device cpu|cuda] [--cache-factor F] [--json FILE]
 *
 * Dense decoding runs greedily for N steps from a P-token prompt cut from FILE
 * (default: the GPL-3 text every Debian system ships). Each (budget, mode) then
 * decodes the same path teacher-forced (it is fed dense's tokens), so every step
 * compares like with like: top-1 agreement with dense, KL(dense || sparse) of the
 * next-token distribution, prediction recall against the step's true queries,
 * bytes fetched per step, the share of selected blocks resident in time, stall.
 * Lookahead mode drafts 4 tokens per step by prompt lookup (n-gram) and verifies
 * them in the same forward, as speculative decoding does; only the first row is
 * compared, and the drafted rows' KV is dropped after the step. */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"
#include "oasiskv/sampling.h"
#include "oasiskv/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "bench_sparse: %s: %s\n", what, okv_last_error());
    exit(1);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_sparse: cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n)
        exit(1);
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* prompt lookup: the tokens that followed the latest earlier occurrence of the
 * last n tokens (n = 3, 2, 1) */
static int ngram_draft(const int32_t *hist, int n_hist, int k, int32_t *out)
{
    for (int n = 3; n >= 1; n--) {
        if (n_hist <= n)
            continue;
        for (int start = n_hist - n - 1; start >= 0; start--) {
            if (memcmp(hist + start, hist + n_hist - n, sizeof(int32_t) * (size_t)n))
                continue;
            int m = 0;
            while (m < k && start + n + m < n_hist)
                out[m] = hist[start + n + m], m++;
            if (m > 0)
                return m;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf", *text_path = "/usr/share/common-licenses/GPL-3";
    const char *budgets_s = "256,512,1024,2048", *modes_s = "current,lookahead,oracle", *json_path = NULL;
    const char *device = "cpu";
    double cache_factor = 1.0;
    int P = 6000, N = 500, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_sparse: %s needs a value\n", a);
            return 1;
        }
        if (!strcmp(a, "-m")) model_path = v;
        else if (!strcmp(a, "--text")) text_path = v;
        else if (!strcmp(a, "--prompt-tokens")) P = atoi(v);
        else if (!strcmp(a, "--steps")) N = atoi(v);
        else if (!strcmp(a, "--budgets")) budgets_s = v;
        else if (!strcmp(a, "--modes")) modes_s = v;
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--cache-factor")) cache_factor = atof(v);
        else {
            fprintf(stderr, "bench_sparse: unknown option %s\n", a);
            return 1;
        }
        i++;
    }
    struct okv_model *m = NULL;
    okv_tokenizer *tok = NULL;
    if (okv_model_load(model_path, &m) != OKV_OK)
        die("model");
    if (!m->gguf || okv_tokenizer_from_gguf(m->gguf, &tok) != OKV_OK)
        die("tokenizer (a GGUF model is expected)");
    size_t tlen;
    char *text = read_file(text_path, &tlen);
    int32_t *ids;
    size_t n_ids;
    if (okv_tokenizer_encode(tok, text, tlen, false, false, &ids, &n_ids) != OKV_OK)
        die("tokenize");
    if ((size_t)P > n_ids) {
        fprintf(stderr, "bench_sparse: %s has only %zu tokens (asked %d)\n", text_path, n_ids, P);
        return 1;
    }
    const int V = m->cfg.vocab_size, ctx = P + N + 8;
    struct okv_backend_params bp = {threads};
    okv_backend *be = NULL;
    if (okv_backend_create(device, &bp, &be) != OKV_OK)
        die("backend");

    /* dense reference */
    float *ref_lp = malloc(sizeof(float) * (size_t)N * V), *logits = malloc(sizeof(float) * (size_t)V * 8);
    float *lp = malloc(sizeof(float) * (size_t)V);
    int32_t *dense_tok = malloc(sizeof(int32_t) * (size_t)N), *hist = malloc(sizeof(int32_t) * (size_t)(P + N + 8));
    memcpy(hist, ids, sizeof(int32_t) * (size_t)P);
    struct okv_engine_params dp = {.max_ctx = ctx, .max_batch_tokens = 512};
    okv_engine *e = NULL;
    if (okv_engine_create(m, be, &dp, &e) != OKV_OK)
        die("dense engine");
    int32_t seqs[512];
    uint8_t want[512];
    int seq;
    double t0 = okv_now();
    okv_engine_seq_create(e, &seq);
    for (int i = 0; i < 512; i++)
        seqs[i] = seq;
    for (int at = 0; at < P; at += 512) {
        int n = P - at < 512 ? P - at : 512;
        memset(want, 0, sizeof want);
        want[n - 1] = at + n == P;
        struct okv_batch b = {n, ids + at, seqs, want, NULL};
        if (okv_engine_forward(e, &b, logits) != OKV_OK)
            die("dense prefill");
    }
    double t_prefill = okv_now() - t0;
    for (int s = 0; s < N; s++) {
        okv_log_softmax(logits, V, ref_lp + (size_t)s * V);
        dense_tok[s] = okv_argmax(logits, V);
        hist[P + s] = dense_tok[s];
        want[0] = 1;
        struct okv_batch b = {1, &dense_tok[s], seqs, want, NULL};
        if (okv_engine_forward(e, &b, logits) != OKV_OK)
            die("dense decode");
    }
    double t_dense = okv_now() - t0;
    okv_engine_free(e);
    fprintf(stderr, "dense: prompt %d tokens (prefill %.1f s), %d steps (%.1f s)\n", P, t_prefill, N, t_dense - t_prefill);

    FILE *jf = json_path ? fopen(json_path, "w") : NULL;
    if (jf)
        fprintf(jf, "{\"model\": \"%s\", \"text\": \"%s\", \"prompt_tokens\": %d, \"steps\": %d, \"runs\": [", model_path,
                text_path, P, N);
    printf("| budget | predict | top-1 = dense | mean KL | recall | fetched KiB/step | in time | stall ms/step | device KV peak MiB |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    int first_run = 1;
    char bbuf[256];
    snprintf(bbuf, sizeof bbuf, "%s", budgets_s);
    for (char *bt = strtok(bbuf, ","); bt; bt = strtok(NULL, ",")) {
        int budget = atoi(bt);
        char mbuf[128];
        snprintf(mbuf, sizeof mbuf, "%s", modes_s);
        char *save = NULL;
        for (char *mt = strtok_r(mbuf, ",", &save); mt; mt = strtok_r(NULL, ",", &save)) {
            enum okv_predict mode = !strcmp(mt, "oracle") ? OKV_PREDICT_ORACLE
                                    : !strcmp(mt, "lookahead") ? OKV_PREDICT_LOOKAHEAD : OKV_PREDICT_CURRENT;
            struct okv_engine_params sp = {.max_ctx = ctx, .max_batch_tokens = 512, .kv_budget = budget,
                                           .predict = mode, .track_recall = mode != OKV_PREDICT_ORACLE,
                                           .cache_factor = (float)cache_factor};
            if (okv_engine_create(m, be, &sp, &e) != OKV_OK)
                die("sparse engine");
            okv_engine_seq_create(e, &seq);
            for (int i = 0; i < 512; i++)
                seqs[i] = seq;
            for (int at = 0; at < P; at += 512) {
                int n = P - at < 512 ? P - at : 512;
                memset(want, 0, sizeof want);
                want[n - 1] = at + n == P;
                struct okv_batch b = {n, ids + at, seqs, want, NULL};
                if (okv_engine_forward(e, &b, logits) != OKV_OK)
                    die("sparse prefill");
            }
            okv_engine_stats_reset(e);
            int agree = 0;
            double kl = 0;
            for (int s = 0; s < N; s++) {
                okv_log_softmax(logits, V, lp);
                const float *r = ref_lp + (size_t)s * V;
                double d = 0;
                for (int i = 0; i < V; i++)
                    d += exp((double)r[i]) * ((double)r[i] - (double)lp[i]);
                kl += d;
                agree += okv_argmax(logits, V) == dense_tok[s];
                /* next step: dense's token, plus drafts in lookahead mode */
                int32_t rows[8];
                uint8_t draft[8] = {0};
                rows[0] = dense_tok[s];
                int n = 1;
                if (mode == OKV_PREDICT_LOOKAHEAD)
                    n += ngram_draft(hist, P + s + 1, 4, rows + 1);
                for (int i = 1; i < n; i++)
                    draft[i] = 1;
                memset(want, 0, 8);
                want[0] = 1;
                int len0 = okv_engine_seq_len(e, seq);
                struct okv_batch b = {n, rows, seqs, want, draft};
                if (okv_engine_forward(e, &b, logits) != OKV_OK)
                    die("sparse decode");
                if (n > 1 && okv_engine_seq_truncate(e, seq, len0 + 1) != OKV_OK)
                    die("truncate");
            }
            struct okv_engine_stats st;
            okv_engine_stats_get(e, &st);
            double recall = st.recall_total ? (double)st.recall_hits / (double)st.recall_total : NAN;
            double in_time = st.units_selected ? (double)st.units_in_time / (double)st.units_selected : NAN;
            printf("| %d | %s | %.3f | %.4f | %s | %.1f | %.3f | %.3f | %.1f |\n", budget, mt, (double)agree / N, kl / N,
                   isnan(recall) ? "-" : (snprintf(bbuf + 200, 40, "%.3f", recall), bbuf + 200),
                   st.fetch_bytes / 1024.0 / N, in_time, st.stall_s * 1e3 / N, st.device_bytes_peak / 1048576.0);
            fflush(stdout);
            if (jf)
                fprintf(jf, "%s{\"budget\": %d, \"predict\": \"%s\", \"top1_agreement\": %.5f, \"mean_kl\": %.6f, "
                            "\"recall\": %.5f, \"fetch_bytes_per_step\": %.1f, \"resident_in_time\": %.5f, "
                            "\"stall_ms_per_step\": %.4f, \"device_bytes_peak\": %zu}",
                        first_run ? "" : ", ", budget, mt, (double)agree / N, kl / N, isnan(recall) ? -1.0 : recall,
                        (double)st.fetch_bytes / N, isnan(in_time) ? -1.0 : in_time, st.stall_s * 1e3 / N,
                        st.device_bytes_peak);
            first_run = 0;
            okv_engine_free(e);
        }
    }
    if (jf) {
        fprintf(jf, "]}\n");
        fclose(jf);
    }
    free(ref_lp);
    free(logits);
    free(lp);
    free(dense_tok);
    free(hist);
    free(text);
    okv_free(ids);
    okv_backend_free(be);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return 0;
}
