/* bench_sparse: fidelity and traffic of OasisKV's selection against dense decoding
 * on a real model and a long real text: a thin main over okv_eval_fidelity.
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
#include "oasiskv/eval.h"
#include "oasiskv/model.h"
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

static void progress(void *user, const char *msg)
{
    fprintf(stderr, "%s\n", msg);
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
    FILE *f = fopen(text_path, "rb");
    if (!f) {
        fprintf(stderr, "bench_sparse: cannot open %s\n", text_path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long tlen = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)tlen + 1);
    if (fread(text, 1, (size_t)tlen, f) != (size_t)tlen)
        return 1;
    fclose(f);
    int32_t *ids;
    size_t n_ids;
    if (okv_tokenizer_encode(tok, text, (size_t)tlen, false, false, &ids, &n_ids) != OKV_OK)
        die("tokenize");
    if ((size_t)P > n_ids) {
        fprintf(stderr, "bench_sparse: %s has only %zu tokens (asked %d)\n", text_path, n_ids, P);
        return 1;
    }
    struct okv_backend_params bp = {.n_threads = threads};
    okv_backend *be = NULL;
    if (okv_backend_create(device, &bp, &be) != OKV_OK)
        die("backend");

    /* every (budget, mode) */
    struct okv_eval_config cfgs[64];
    const char *mode_names[64];
    int n_cfgs = 0;
    char bbuf[256], mbuf[128];
    snprintf(bbuf, sizeof bbuf, "%s", budgets_s);
    for (char *bt = strtok(bbuf, ","); bt && n_cfgs < 64; bt = strtok(NULL, ",")) {
        snprintf(mbuf, sizeof mbuf, "%s", modes_s);
        char *save = NULL;
        for (char *mt = strtok_r(mbuf, ",", &save); mt && n_cfgs < 64; mt = strtok_r(NULL, ",", &save)) {
            enum okv_predict mode = !strcmp(mt, "oracle") ? OKV_PREDICT_ORACLE
                                    : !strcmp(mt, "lookahead") ? OKV_PREDICT_LOOKAHEAD : OKV_PREDICT_CURRENT;
            mode_names[n_cfgs] = mode == OKV_PREDICT_ORACLE ? "oracle" : mode == OKV_PREDICT_LOOKAHEAD ? "lookahead" : "current";
            cfgs[n_cfgs++] = (struct okv_eval_config){.kv_budget = atoi(bt), .predict = mode,
                                                      .cache_factor = (float)cache_factor};
        }
    }
    struct okv_eval_fid_cell *cells = calloc((size_t)n_cfgs, sizeof *cells);
    if (okv_eval_fidelity(m, be, ids, P, N, cfgs, n_cfgs, true, progress, NULL, cells) != OKV_OK)
        die("fidelity");

    FILE *jf = json_path ? fopen(json_path, "w") : NULL;
    if (jf)
        fprintf(jf, "{\"model\": \"%s\", \"text\": \"%s\", \"prompt_tokens\": %d, \"steps\": %d, \"runs\": [", model_path,
                text_path, P, N);
    printf("| budget | predict | top-1 = dense | mean KL | recall | fetched KiB/step | in time | stall ms/step | device KV peak MiB |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_cfgs; i++) {
        const struct okv_eval_fid_cell *c = &cells[i];
        char recall[32] = "-", in_time[32] = "-";   /* the oracle's fetches are synchronous: no in-time share */
        if (c->recall >= 0)
            snprintf(recall, sizeof recall, "%.3f", c->recall);
        if (c->cfg.predict != OKV_PREDICT_ORACLE)
            snprintf(in_time, sizeof in_time, "%.3f", c->resident_in_time);
        printf("| %d | %s | %.3f | %.4f | %s | %.1f | %s | %.3f | %.1f |\n", c->cfg.kv_budget, mode_names[i], c->top1,
               c->mean_kl, recall, c->fetch_kib_per_step, in_time, c->stall_ms_per_step,
               c->device_bytes_peak / 1048576.0);
        if (jf)
            fprintf(jf, "%s{\"budget\": %d, \"predict\": \"%s\", \"top1_agreement\": %.5f, \"mean_kl\": %.6f, "
                        "\"recall\": %.5f, \"fetch_bytes_per_step\": %.1f, \"resident_in_time\": %.5f, "
                        "\"stall_ms_per_step\": %.4f, \"device_bytes_peak\": %zu}",
                    i ? ", " : "", c->cfg.kv_budget, mode_names[i], c->top1, c->mean_kl, c->recall,
                    c->fetch_kib_per_step * 1024.0, c->resident_in_time, c->stall_ms_per_step, c->device_bytes_peak);
    }
    if (jf) {
        fprintf(jf, "]}\n");
        fclose(jf);
    }
    free(cells);
    free(text);
    okv_free(ids);
    okv_backend_free(be);
    okv_tokenizer_free(tok);
    okv_model_free(m);
    return 0;
}
