/* bench_step: time of one decode step of a batch of sequences at a given context,
 * dense against OasisKV, on any backend, with weights from a checkpoint or random
 * ones built from a config.json (vLLM's --load-format dummy).
 *
 *   bench_step --config DIR|-m MODEL [--device cuda] [--batch 1,16,64,128]
 *              [--ctx 8192,32768] [--kv-budget dense,2048] [--steps 20] [--warmup 3]
 *              [--predict lookahead|current|oracle|layer-ahead|layer-ahead-attn] [--cache-factor 1] [--sticky 0] [--kv-host-dtype auto|fp8]
 *              [--hbm-gbps 4800] [--tp N] [--overlap 0|1] [--dense-while-room 0|1] [--json FILE]
 *
 * Each sequence is filled with ctx random KV positions (okv_engine_seq_fill_random:
 * no prefill is run), then `steps` decode steps of one token per sequence are
 * timed. Reported: step time, output tokens/s, the roofline time (bytes of weights
 * plus the KV that attention reads, over the HBM bandwidth given), the KV fetched
 * per step, the share of selected blocks resident in time, the stall, and the host's
 * time per step (okv_engine_stats): issuing the step up to its final sync, of which
 * the sparse bookkeeping (selection launches and waits, residency, fetch issue) and
 * the attention lists, of which blocked waiting for the device inside the step (the
 * sampled tokens' copy, staging buffers), and the final sync's wait. On a GPU a step
 * whose issue time less its blocked time nears its step time is bound by the host. A
 * point whose tiers do not fit is reported as such. --overlap 1: each step is queued
 * before the one before is collected, its rows taking that step's samples on the device
 * (okv_engine_forward_queue, as `serve` runs decode steps); the kv column then says
 * "ovl". --dense-while-room 1: sparse engines keep every sequence dense (all its blocks on the
 * device, nothing selected: the dense phase of `serve`'s default), to time that phase against
 * the dense engine's step; the kv column says "room". */
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"
#include "oasiskv/sampling.h"
#include "oasiskv/tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *t = strtok(buf, ","); t && n < max; t = strtok(NULL, ","))
        out[n++] = !strcmp(t, "dense") ? 0 : atoi(t);
    return n;
}

int main(int argc, char **argv)
{
    const char *config = NULL, *model_path = NULL, *device = "cpu", *json_path = NULL;
    const char *batch_s = "1,16,64,128", *ctx_s = "8192,32768", *budget_s = "dense,2048", *pred_s = "lookahead";
    int steps = 20, warmup = 3, threads = 0, tp = 1, overlap = 0, room = 0;
    float cache_factor = 1.0f, sticky = 0.0f;
    bool host_fp8 = false;
    double hbm_gbps = 4800;
    for (int i = 1; i + 1 < argc + 1; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_step: %s needs a value\n", a);
            return 1;
        }
        if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "-m")) model_path = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--batch")) batch_s = v;
        else if (!strcmp(a, "--ctx")) ctx_s = v;
        else if (!strcmp(a, "--kv-budget")) budget_s = v;
        else if (!strcmp(a, "--predict")) pred_s = v;
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--cache-factor")) cache_factor = (float)atof(v);
        else if (!strcmp(a, "--sticky")) sticky = (float)atof(v);
        else if (!strcmp(a, "--kv-host-dtype")) {
            if (strcmp(v, "auto") && strcmp(v, "fp8")) {
                fprintf(stderr, "bench_step: --kv-host-dtype %s: auto or fp8\n", v);
                return 1;
            }
            host_fp8 = !strcmp(v, "fp8");
        }
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--tp")) tp = atoi(v);
        else if (!strcmp(a, "--hbm-gbps")) hbm_gbps = atof(v);
        else if (!strcmp(a, "--overlap")) overlap = atoi(v);
        else if (!strcmp(a, "--dense-while-room")) room = atoi(v);
        else if (!strcmp(a, "--json")) json_path = v;
        else {
            fprintf(stderr, "bench_step: unknown option %s\n", a);
            return 1;
        }
        i++;
    }
    struct okv_model *m = NULL;
    enum okv_status st = config ? okv_model_load_dummy(config, 1, &m)
                                : okv_model_load(model_path ? model_path : "models/SmolLM2-135M-Instruct.Q4_1.gguf", &m);
    if (st != OKV_OK) {
        fprintf(stderr, "bench_step: %s\n", okv_last_error());
        return 1;
    }
    struct okv_backend_params bp = {.n_threads = threads};
    okv_backend *be = NULL;
    if ((tp > 1 ? okv_backend_create_tp(device, &bp, tp, &m->cfg, &be) : okv_backend_create(device, &bp, &be)) != OKV_OK) {
        fprintf(stderr, "bench_step: %s\n", okv_last_error());
        return 1;
    }
    const bool after_attn = !strcmp(pred_s, "layer-ahead-attn");
    enum okv_predict pred = !strcmp(pred_s, "current")                     ? OKV_PREDICT_CURRENT
                            : !strcmp(pred_s, "oracle")                    ? OKV_PREDICT_ORACLE
                            : !strcmp(pred_s, "layer-ahead") || after_attn ? OKV_PREDICT_LAYER_AHEAD
                                                                           : OKV_PREDICT_LOOKAHEAD;
    int batches[16], ctxs[16], budgets[16];
    int nbatch = parse_list(batch_s, batches, 16), nctx = parse_list(ctx_s, ctxs, 16), nbud = parse_list(budget_s, budgets, 16);
    const struct okv_model_config *c = &m->cfg;
    FILE *jf = json_path ? fopen(json_path, "w") : NULL;
    if (jf)
        fprintf(jf, "{\"device\": \"%s\", \"model\": \"%s\", \"points\": [", device, config ? config : model_path);
    int first = 1;
    printf("| batch | ctx | kv | step ms | tok/s | roofline ms | of roofline | fetched MiB/step | in time | stall ms/step "
           "| host issue ms | of which sparse | of which lists | of which blocked | sync wait ms |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int ci = 0; ci < nctx; ci++)
        for (int bi = 0; bi < nbatch; bi++)
            for (int ki = 0; ki < nbud; ki++) {
                int B = batches[bi], ctx = ctxs[ci], budget = budgets[ki];
                struct okv_engine_params ep = {.max_ctx = ctx + steps + warmup + 16, .max_seqs = B,
                                               .max_batch_tokens = B < 256 ? 256 : B, .kv_budget = budget,
                                               .predict = pred, .ahead_after_attention = after_attn,
                                               .cache_factor = cache_factor, .sticky = sticky,
                                               .host_fp8 = host_fp8, .dense_while_room = room && budget > 0};
                if (ep.dense_while_room)   /* group slots for every block: the sequences stay dense */
                    ep.kv_slots = B * ((ep.max_ctx + 15) / 16 + 2) + ep.max_batch_tokens / 16 + 1;
                okv_engine *e = NULL;
                char kvname[32];
                snprintf(kvname, sizeof kvname, budget ? (host_fp8 ? "%d fp8" : "%d") : "dense", budget);
                if (ep.dense_while_room)
                    strcat(kvname, " room");
                if (overlap)
                    strcat(kvname, " ovl");
                if ((st = okv_engine_create(m, be, &ep, &e)) != OKV_OK) {
                    printf("| %d | %d | %s | does not fit: %s ||||||||||||\n", B, ctx, kvname, okv_last_error());
                    fflush(stdout);
                    continue;
                }
                int32_t *seqs = malloc(sizeof(int32_t) * (size_t)B), *toks = malloc(sizeof(int32_t) * (size_t)B);
                uint8_t *want = malloc((size_t)B);
                float *logits = malloc(sizeof(float) * (size_t)B * c->vocab_size);
                struct okv_sampling *params = calloc((size_t)B, sizeof *params);   /* temperature 0: greedy */
                double *us = calloc((size_t)B, sizeof *us);
                int ok = 1;
                for (int s = 0; s < B && ok; s++) {
                    ok = okv_engine_seq_create(e, &seqs[s]) == OKV_OK &&
                         okv_engine_seq_fill_random(e, seqs[s], ctx, (uint64_t)s + 1) == OKV_OK;
                    toks[s] = (int32_t)(s % c->vocab_size);
                    want[s] = 1;
                }
                double t_step = 0;
                struct okv_engine_stats stt = {0};
                int32_t *prev = malloc(sizeof(int32_t) * (size_t)B);
                for (int s = 0; s < B; s++)
                    prev[s] = s;   /* row s takes sample s of the step before */
                if (overlap && !okv_engine_can_queue(e)) {
                    ok = 0;
                    okv_set_error(OKV_ERR_UNSUPPORTED, "--overlap: this backend does not queue steps");
                }
                bool queued = false;
                for (int it = 0; ok && it < warmup + steps; it++) {
                    int32_t *next = (int32_t *)logits;   /* greedy, sampled on the backend */
                    if (it == warmup) {
                        if (queued) {   /* the warm-up's last step lands (and its fetch counts) before the reset */
                            int got = 0;
                            ok = okv_engine_collect(e, next, &got) == OKV_OK;
                            memcpy(toks, next, sizeof(int32_t) * (size_t)B);
                            queued = false;
                        }
                        okv_engine_stats_reset(e);
                        t_step = okv_now();
                    }
                    struct okv_batch b = {B, toks, seqs, want, NULL};
                    if (overlap) {   /* queue this step, then collect the one before it */
                        int got = 0;
                        ok = ok && okv_engine_forward_queue(e, &b, queued ? prev : NULL, params, us) == OKV_OK &&
                             (!queued || okv_engine_collect(e, next, &got) == OKV_OK);
                        queued = ok;
                        if (ok && it + 1 == warmup + steps)
                            ok = okv_engine_collect(e, next, &got) == OKV_OK;
                    } else {
                        ok = okv_engine_forward_sample(e, &b, params, us, next, NULL) == OKV_OK;
                        memcpy(toks, next, sizeof(int32_t) * (size_t)B);
                    }
                }
                free(prev);
                if (!ok) {
                    printf("| %d | %d | %s | does not fit: %s ||||||||||||\n", B, ctx, kvname, okv_last_error());
                } else {
                    t_step = (okv_now() - t_step) / steps;
                    okv_engine_stats_get(e, &stt);
                    /* roofline: weights once + the KV attention reads (K and V, bf16 on a GPU) */
                    double wbytes = (double)okv_engine_weight_bytes(e);
                    int read_tokens = budget && budget < ctx ? budget : ctx;
                    double kvbytes = (double)B * read_tokens * c->n_layers * c->n_kv_heads * c->head_dim * 2.0 *
                                     (!strcmp(device, "cpu") ? 4.0 : 2.0);
                    double roof = (wbytes + kvbytes) / (hbm_gbps * 1e9);
                    double in_time = stt.units_selected ? (double)stt.units_in_time / (double)stt.units_selected : 1.0;
                    printf("| %d | %d | %s | %.3f | %.0f | %.3f | %.0f%% | %.2f | %.4f | %.4f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", B,
                           ctx, kvname, t_step * 1e3, B / t_step, roof * 1e3, 100.0 * roof / t_step,
                           stt.fetch_bytes / 1048576.0 / steps, in_time, stt.stall_s * 1e3 / steps,
                           stt.host_issue_s * 1e3 / steps, stt.host_sparse_s * 1e3 / steps, stt.host_lists_s * 1e3 / steps,
                           stt.host_blocked_s * 1e3 / steps, stt.sync_wait_s * 1e3 / steps);
                    if (jf)
                        fprintf(jf, "%s{\"batch\": %d, \"ctx\": %d, \"kv_budget\": %d, \"step_ms\": %.4f, \"tokens_per_s\": %.1f, "
                                    "\"roofline_ms\": %.4f, \"fetch_bytes_per_step\": %.0f, \"resident_in_time\": %.5f, "
                                    "\"stall_ms_per_step\": %.5f, \"device_bytes_peak\": %zu, \"host_issue_ms\": %.4f, "
                                    "\"host_sparse_ms\": %.4f, \"host_lists_ms\": %.4f, \"host_blocked_ms\": %.4f, "
                                    "\"sync_wait_ms\": %.4f}",
                                first ? "" : ", ", B, ctx, budget, t_step * 1e3, B / t_step, roof * 1e3,
                                (double)stt.fetch_bytes / steps, in_time, stt.stall_s * 1e3 / steps, stt.device_bytes_peak,
                                stt.host_issue_s * 1e3 / steps, stt.host_sparse_s * 1e3 / steps, stt.host_lists_s * 1e3 / steps,
                                stt.host_blocked_s * 1e3 / steps, stt.sync_wait_s * 1e3 / steps);
                    first = 0;
                }
                fflush(stdout);
                for (int s = 0; s < B; s++)
                    okv_engine_seq_free(e, seqs[s]);
                okv_engine_free(e);
                free(seqs);
                free(toks);
                free(want);
                free(logits);
                free(params);
                free(us);
            }
    if (jf) {
        fprintf(jf, "]}\n");
        fclose(jf);
    }
    okv_backend_free(be);
    okv_model_free(m);
    return 0;
}
