/* cuda_gemv: the small-batch projection (the GEMV kernel, cuda_gemv.cu) on the shapes of the
 * models we serve, alone: microseconds a call and the weight bytes it streams per second.
 *
 *   cuda_gemv [--calls 256] [--rows 1,4] [--shapes 8b,trained,smollm2]
 *
 * For each shape (k inputs -> m outputs, bf16 weights) and row count, `calls` matmuls back to
 * back through the backend's ops table, each on the next of several copies of the weight so
 * that together they exceed the H200's 50 MB L2 (a repeated weight would be read from L2),
 * once with the segment graphs off (every call its own launch) and once on (runs of 64 calls
 * replayed as graphs: the launches as the decode step issues them). GB/s counts weight bytes
 * only, against the H200's 4.8 TB/s (its specification; a read-only stream, the 1 GB lm_head
 * at 1 row, measured 4.58 TB/s, above the 4.2 TB/s of a device-to-device copy, REFERENCE.md,
 * which reads and writes). The kernel's variants are environment switches read at its first launch
 * (OKV_GEMV_COLS, OKV_GEMV_UNROLL, OKV_PDL: cuda_gemv.cu), so a variant is one run. */
#include "backend/cuda/cuda_bench.h"
#include "oasiskv/backend.h"
#include "oasiskv/tensor.h"
#include "oasiskv/common.h"
#include "oasiskv/sampling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HBM_GBS 4800.0

struct shape {
    const char *model, *name;
    int k, m;
};
static const struct shape shapes[] = {
    {"8b", "qkv", 4096, 6144},   {"8b", "o", 4096, 4096},          {"8b", "gate+up", 4096, 28672},
    {"8b", "down", 14336, 4096}, {"8b", "lm_head", 4096, 128256},  {"trained", "qkv", 256, 512},
    {"trained", "gate+up", 256, 1536}, {"trained", "down", 768, 256}, {"smollm2", "qkv", 576, 960},
    {"smollm2", "gate+up", 576, 3072}, {"smollm2", "down", 1536, 576},
};

static void die(const char *what)
{
    fprintf(stderr, "cuda_gemv: %s: %s\n", what, okv_last_error());
    exit(1);
}

static bool listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    int calls = 256;
    const char *rows_arg = "1,4", *models = "8b,trained,smollm2";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows_arg = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            models = argv[++i];
        else {
            fprintf(stderr, "usage: cuda_gemv [--calls N] [--rows 1,4] [--shapes 8b,trained,smollm2]\n");
            return 2;
        }
    }
    if (calls < 64)
        calls = 64;
    struct okv_rng rng;
    okv_rng_seed(&rng, 1);
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 0};
    if (okv_backend_create("cuda", &bp, &be) != OKV_OK)
        die("backend");
    const struct okv_backend_ops *o = be->ops;
    const char *cc = getenv("OKV_GEMV_COLS"), *u = getenv("OKV_GEMV_UNROLL"), *pd = getenv("OKV_PDL");
    printf("GEMV variant: OKV_GEMV_COLS=%s OKV_GEMV_UNROLL=%s OKV_PDL=%s; %d calls a point\n", cc ? cc : "-", u ? u : "-",
           pd ? pd : "-", calls);
    printf("| model | proj | k | m | rows | copies | eager us | eager GB/s | graphs us | graphs GB/s | graphs %% of %.0f |\n",
           HBM_GBS);
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const struct shape *sh = &shapes[si];
        if (!listed(models, sh->model))
            continue;
        const size_t nw = (size_t)sh->k * sh->m, wbytes = nw * 2;
        int copies = (int)((size_t)(256u << 20) / wbytes) + 1;
        if (copies > 64)
            copies = 64;
        okv_bweight **w = calloc((size_t)copies, sizeof *w);
        float *hw = malloc(sizeof(float) * nw);
        for (int c = 0; c < copies; c++) {
            for (size_t i = 0; i < nw; i++)
                hw[i] = (float)(okv_rng_uniform(&rng) * 0.02 - 0.01);
            struct okv_tensor_view t = {.dtype = OKV_DTYPE_F32, .n_dims = 2, .ne = {sh->k, sh->m, 1, 1}, .data = hw,
                                        .nbytes = sizeof(float) * nw};
            snprintf(t.name, sizeof t.name, "bench.%s.weight", sh->name);
            if (o->weight_load(be, &t, &w[c]) != OKV_OK)
                die("weight_load");
        }
        free(hw);
        okv_bmem *x = NULL, *y = NULL;
        if (o->mem_alloc(be, (size_t)4 * sh->k, &x) != OKV_OK || o->mem_alloc(be, (size_t)4 * sh->m, &y) != OKV_OK)
            die("mem_alloc");
        float *hx = malloc(sizeof(float) * 4 * (size_t)sh->k);
        for (int i = 0; i < 4 * sh->k; i++)
            hx[i] = (float)(okv_rng_uniform(&rng) * 2.0 - 1.0);
        o->mem_write(be, x, 0, hx, (size_t)4 * sh->k);
        free(hx);
        for (const char *r = rows_arg; *r;) {
            const int rows = atoi(r);
            double us[2];
            for (int gi = 0; gi < 2; gi++) {
                okv_cuda_set_graphs(be, gi == 1);
                /* warm-up: two sightings of each run (the second is captured) */
                for (int pass = 0; pass < 3; pass++) {
                    for (int i = 0; i < calls; i++)
                        if (o->matmul(be, y, x, w[i % copies], NULL, rows, sh->k, sh->m) != OKV_OK)
                            die("matmul");
                    if (o->sync(be) != OKV_OK)
                        die("sync");
                }
                const double t0 = okv_now();
                for (int i = 0; i < calls; i++)
                    if (o->matmul(be, y, x, w[i % copies], NULL, rows, sh->k, sh->m) != OKV_OK)
                        die("matmul");
                if (o->sync(be) != OKV_OK)
                    die("sync");
                us[gi] = (okv_now() - t0) / calls * 1e6;
            }
            printf("| %s | %s | %d | %d | %d | %d | %.2f | %.0f | %.2f | %.0f | %.1f%% |\n", sh->model, sh->name, sh->k, sh->m, rows,
                   copies, us[0], wbytes / us[0] * 1e-3, us[1], wbytes / us[1] * 1e-3, 100.0 * wbytes / us[1] * 1e-3 / HBM_GBS);
            fflush(stdout);
            while (*r && *r != ',')
                r++;
            if (*r == ',')
                r++;
        }
        o->mem_free(be, x);
        o->mem_free(be, y);
        for (int c = 0; c < copies; c++)
            o->weight_free(be, w[c]);
        free(w);
    }
    okv_backend_free(be);
    return 0;
}
