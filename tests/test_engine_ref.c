/* label: model */
/* The engine against references it did not write: logits and greedy tokens of tiny
 * random checkpoints computed by Hugging Face transformers (tests/data/models,
 * made by tests/py/make_reference_models.py), for HF folders and GGUF files of every
 * supported dtype. Each step's logits must match within 1e-3 (fp32) and the greedy
 * token exactly, with prompts crossing KV block boundaries, for several block sizes
 * and prefill chunkings. */
/* paths here are far below the buffer sizes; gcc cannot prove it */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "oasiskv/backend.h"
#include "oasiskv/engine.h"
#include "oasiskv/model.h"
#include "oasiskv/sampling.h"
#include "testutil.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>

struct ref {
    int32_t prompt[512];
    int n_prompt;
    int32_t greedy[512];
    int n_steps;
    int vocab;
    float *logits;   /* [n_steps][vocab] */
};

static int load_ref(const char *json_path, struct ref *r)
{
    char *txt = tu_read_file(json_path, NULL);
    if (!txt)
        return -1;
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    if (!j)
        return -1;
    cJSON *p = cJSON_GetObjectItem(j, "prompt_tokens"), *g = cJSON_GetObjectItem(j, "greedy_tokens");
    cJSON *lf = cJSON_GetObjectItem(j, "logits_file"), *v = cJSON_GetObjectItem(j, "vocab");
    if (!cJSON_IsArray(p) || !cJSON_IsArray(g) || !cJSON_IsString(lf) || !cJSON_IsNumber(v)) {
        cJSON_Delete(j);
        return -1;
    }
    r->n_prompt = cJSON_GetArraySize(p);
    r->n_steps = cJSON_GetArraySize(g);
    r->vocab = v->valueint;
    for (int i = 0; i < r->n_prompt; i++)
        r->prompt[i] = cJSON_GetArrayItem(p, i)->valueint;
    for (int i = 0; i < r->n_steps; i++)
        r->greedy[i] = cJSON_GetArrayItem(g, i)->valueint;
    char lpath[4096];
    snprintf(lpath, sizeof lpath, "%s", json_path);
    char *slash = strrchr(lpath, '/');
    snprintf(slash + 1, sizeof lpath - (size_t)(slash + 1 - lpath), "%s", lf->valuestring);
    cJSON_Delete(j);
    size_t len = 0;
    r->logits = (float *)tu_read_file(lpath, &len);
    if (!r->logits || len != sizeof(float) * (size_t)r->n_steps * r->vocab)
        return -1;
    return 0;
}

/* Teacher-forced run: prefill the prompt in chunks, then feed the reference greedy
 * tokens one at a time; compare logits at every step. */
static void check_ref(const char *name, okv_engine *e, const struct ref *r, int chunk)
{
    int seq;
    CHECK(okv_engine_seq_create(e, &seq) == OKV_OK, "%s", okv_last_error());
    float *lg = malloc(sizeof(float) * (size_t)r->vocab);
    int32_t seqs[512];
    uint8_t want[512];
    for (int i = 0; i < 512; i++)
        seqs[i] = seq;
    double maxdiff = 0;
    int tok_mismatch = 0;
    for (int at = 0; at < r->n_prompt; at += chunk) {
        int n = r->n_prompt - at < chunk ? r->n_prompt - at : chunk;
        memset(want, 0, sizeof want);
        want[n - 1] = at + n == r->n_prompt;
        struct okv_batch b = {n, r->prompt + at, seqs, want, NULL};
        enum okv_status st = okv_engine_forward(e, &b, lg);
        CHECK(st == OKV_OK, "%s: prefill: %s", name, okv_last_error());
        if (st != OKV_OK)
            goto out;
    }
    for (int s = 0; s < r->n_steps; s++) {
        const float *ref = r->logits + (size_t)s * r->vocab;
        for (int i = 0; i < r->vocab; i++) {
            double d = fabs((double)lg[i] - ref[i]);
            if (d > maxdiff || isnan(lg[i]))
                maxdiff = isnan(lg[i]) ? INFINITY : d;
        }
        if (okv_argmax(lg, r->vocab) != r->greedy[s])
            tok_mismatch++;
        if (s + 1 == r->n_steps)
            break;
        want[0] = 1;
        struct okv_batch b = {1, &r->greedy[s], seqs, want, NULL};
        enum okv_status st = okv_engine_forward(e, &b, lg);
        CHECK(st == OKV_OK, "%s: decode: %s", name, okv_last_error());
        if (st != OKV_OK)
            goto out;
    }
    CHECK(maxdiff < 1e-3, "%s (chunk %d): max |logit diff| %.3g", name, chunk, maxdiff);
    CHECK(tok_mismatch == 0, "%s (chunk %d): %d greedy tokens differ", name, chunk, tok_mismatch);
    printf("  %-40s chunk %3d: max |diff| %.2e, %d/%d tokens equal\n", name, chunk, maxdiff,
           r->n_steps - tok_mismatch, r->n_steps);
out:
    okv_engine_seq_free(e, seq);
    free(lg);
}

static void run_model(const char *name, const char *model_path, const char *ref_path, okv_backend *be)
{
    struct ref r = {0};
    if (load_ref(ref_path, &r) != 0) {
        CHECK(0, "%s: cannot read reference %s", name, ref_path);
        free(r.logits);
        return;
    }
    struct okv_model *m = NULL;
    enum okv_status st = okv_model_load(model_path, &m);
    CHECK(st == OKV_OK, "%s: load: %s", name, okv_last_error());
    if (st == OKV_OK) {
        CHECK(m->cfg.vocab_size == r.vocab, "%s: vocab %d vs reference %d", name, m->cfg.vocab_size, r.vocab);
        const int blocks[] = {16, 8};
        for (int bi = 0; bi < 2; bi++) {
            struct okv_engine_params ep = {.block_size = blocks[bi], .kv_slots = 64, .max_batch_tokens = 128};
            okv_engine *e = NULL;
            st = okv_engine_create(m, be, &ep, &e);
            CHECK(st == OKV_OK, "%s: engine: %s", name, okv_last_error());
            if (st != OKV_OK)
                break;
            check_ref(name, e, &r, bi == 0 ? 128 : 7);
            CHECK(okv_kv_used_slots(okv_engine_kv(e)) == 0, "%s: slots leaked", name);
            okv_engine_free(e);
        }
    }
    okv_model_free(m);
    free(r.logits);
}

int main(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/models", tu_src_dir());
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "no reference models in %s\n", dir);
        return 1;
    }
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 2};
    if (okv_backend_cpu_create(&bp, &be) != OKV_OK)
        return 1;
    int n_models = 0;
    struct dirent *ent;
    char names[64][256];
    int n_names = 0;
    while ((ent = readdir(d)) && n_names < 64)
        if (ent->d_name[0] != '.')
            snprintf(names[n_names++], 256, "%s", ent->d_name);
    closedir(d);
    for (int i = 0; i < n_names; i++) {
        char path[2048], ref[2200], model[2200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t nl = strlen(names[i]);
        const char *suffix = ".reference.json";
        if (nl > strlen(suffix) && !strcmp(names[i] + nl - strlen(suffix), suffix)) {
            snprintf(ref, sizeof ref, "%s", path);
            snprintf(model, sizeof model, "%.*s.gguf", (int)(strlen(path) - strlen(suffix)), path);
        } else {
            snprintf(ref, sizeof ref, "%s/reference.json", path);
            snprintf(model, sizeof model, "%s", path);
            FILE *f = fopen(ref, "r");
            if (!f)
                continue;
            fclose(f);
        }
        run_model(names[i], model, ref, be);
        n_models++;
    }
    CHECK(n_models >= 5, "only %d reference models found", n_models);
    okv_backend_free(be);
    CHECK(okv_alloc_live_count(OKV_TAG_ENGINE) == 0, "engine allocations leaked");
    CHECK(okv_alloc_live_count(OKV_TAG_KV) == 0, "KV allocations leaked");
    CHECK(okv_alloc_live_count(OKV_TAG_BACKEND) == 0, "backend allocations leaked");
    return tu_finish("test_engine_ref");
}
