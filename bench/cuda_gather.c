/* cuda_gather: kv_fetch of scattered units from the pinned host tier into HBM on the
 * CUDA backend (one gather kernel per call, 16-byte loads from mapped host memory).
 *
 *   cuda_gather [--host-mb 512] [--calls 40] [--contend] [--alloc-only]
 *
 * --alloc-only: time the host tier's allocation (and free) alone (OKV_HOST_PIN=alloc:
 * cudaHostAlloc, for comparison) and exit.
 *
 * For units of 4, 16 and 64 KiB (K+V of one block and KV head: head_dim 128,
 * blocks of 8, 32, 128 tokens), fetches of 2 MiB and 32 MiB of random host units
 * into random device units, for several grid sizes (the policy's and forced ones).
 * GB/s counts the unit bytes moved, against the 55.4 GB/s host-to-device ceiling
 * measured on the H200 machine (REFERENCE.md). Time: `calls` back-to-back fetches,
 * then kv_fetch_wait + sync, on the host clock. */
#include "backend/cuda/cuda_bench.h"
#include "oasiskv/backend.h"
#include "oasiskv/tensor.h"

#include <stdbool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCIE_GBS 55.4

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

static void die(const char *what)
{
    fprintf(stderr, "cuda_gather: %s: %s\n", what, okv_last_error());
    exit(1);
}

/* --contend: how much a gather running on the copy stream slows compute on the compute
 * stream. Three compute loops (graphs off, so each op is its own launch): a GEMM of 128
 * rows against a 4096 x 4096 bf16 weight (32 MiB read per call), the trained target's
 * FFN-up shape (128 x 256 -> 768: launch-bound), and a residual add over 32M floats
 * (bandwidth-bound, 384 MB of traffic). Each loop is timed alone, then with 32 MiB gathers
 * queued before it on the copy stream (enough to outlast it), for several gather grids.
 * Reported: microseconds per compute op alone and under the gather, and the gather's GB/s
 * over the whole contended run. */
static void contention(okv_backend *be, okv_bkv *kv, size_t unit, int host_blocks, int wslots, int max_units, int calls)
{
    const struct okv_backend_ops *o = be->ops;
    struct okv_cuda_graph_info gi;
    okv_cuda_graph_info(be, &gi);
    okv_cuda_set_graphs(be, false);
    const int n = max_units;   /* 32 MiB per fetch */
    int32_t *src = malloc(4 * (size_t)n * calls), *dst = malloc(4 * (size_t)n);
    for (int i = 0; i < n * calls; i++)
        src[i] = (int32_t)(rnd() % (uint32_t)host_blocks);
    for (int i = 0; i < n; i++)
        dst[i] = wslots + i;
    struct { const char *name; int rows, k, m, reps; bool add; } loads[] = {
        {"GEMM 128x4096x4096", 128, 4096, 4096, 100, false},
        {"GEMM 128x256x768", 128, 256, 768, 400, false},
        {"add 32M floats", 0, 0, 0, 40, true},
    };
    printf("\ncompute beside the gather (unit %zu KiB, fetches of 32 MiB on the copy stream)\n", unit >> 10);
    printf("%-20s %-6s %-12s %-14s %-9s %s\n", "compute op", "CTAs", "alone us/op", "gather us/op", "slowdown", "gather GB/s");
    for (size_t li = 0; li < sizeof loads / sizeof loads[0]; li++) {
        okv_bmem *x = NULL, *y = NULL;
        okv_bweight *w = NULL;
        const size_t nx = loads[li].add ? (size_t)32 << 20 : (size_t)loads[li].rows * loads[li].k;
        const size_t ny = loads[li].add ? nx : (size_t)loads[li].rows * loads[li].m;
        if (o->mem_alloc(be, nx, &x) != OKV_OK || o->mem_alloc(be, ny, &y) != OKV_OK)
            die("mem_alloc");
        float *hx = malloc(sizeof(float) * (nx > ny ? nx : ny));
        for (size_t i = 0; i < (nx > ny ? nx : ny); i++)
            hx[i] = (float)(rnd() % 2001) / 1e6f;
        o->mem_write(be, x, 0, hx, nx);
        o->mem_write(be, y, 0, hx, ny);
        if (!loads[li].add) {
            const size_t nw = (size_t)loads[li].k * loads[li].m;
            float *hw = malloc(sizeof(float) * nw);
            for (size_t i = 0; i < nw; i++)
                hw[i] = (float)(rnd() % 2001) / 1e5f - 0.01f;
            struct okv_tensor_view t = {.dtype = OKV_DTYPE_F32, .n_dims = 2, .ne = {loads[li].k, loads[li].m, 1, 1},
                                        .data = hw, .nbytes = sizeof(float) * nw};
            snprintf(t.name, sizeof t.name, "contend.weight");
            if (o->weight_load(be, &t, &w) != OKV_OK)
                die("weight_load");
            free(hw);
        }
        free(hx);
        const int reps = loads[li].reps;
#define LOOP()                                                                                               \
    for (int r = 0; r < reps; r++)                                                                           \
        if ((loads[li].add ? o->add(be, y, x, nx)                                                            \
                           : o->matmul(be, y, x, w, NULL, loads[li].rows, loads[li].k, loads[li].m)) != OKV_OK) \
            die("compute");
        LOOP();
        o->sync(be);
        double t0 = okv_now();
        LOOP();
        o->sync(be);
        const double alone = (okv_now() - t0) / reps * 1e6;
        const int ctas[] = {4, 8, 16, 32, 64};
        for (size_t ci = 0; ci < sizeof ctas / sizeof ctas[0]; ci++) {
            okv_cuda_set_fetch_ctas(be, ctas[ci]);
            int pend;
            double stall;
            const double tg = okv_now();
            for (int c = 0; c < calls; c++)
                if (o->kv_fetch(be, kv, 0, n, src + (size_t)c * n, dst) != OKV_OK)
                    die("kv_fetch");
            t0 = okv_now();
            LOOP();
            o->sync(be);   /* the compute stream only (the step sync's default) */
            const double with = (okv_now() - t0) / reps * 1e6;
            o->kv_fetch_wait(be, kv, 0, &pend, &stall);
            if (o->sync(be) != OKV_OK)
                die("sync");
            const double gbs = (double)n * unit * calls / (okv_now() - tg) / 1e9;
            printf("%-20s %-6d %-12.1f %-14.1f %-9.2f %.1f\n", loads[li].name, okv_cuda_fetch_ctas_last(be), alone, with,
                   with / alone, gbs);
        }
#undef LOOP
        okv_cuda_set_fetch_ctas(be, 0);
        o->mem_free(be, x);
        o->mem_free(be, y);
        if (w)
            o->weight_free(be, w);
    }
    okv_cuda_set_graphs(be, gi.on);
    free(src);
    free(dst);
}

int main(int argc, char **argv)
{
    int host_mb = 512, calls = 40;
    bool alloc_only = false;
    bool contend = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--contend"))
            contend = true;
        else if (!strcmp(argv[i], "--alloc-only"))
            alloc_only = true;
        else if (!strcmp(argv[i], "--host-mb") && i + 1 < argc)
            host_mb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: cuda_gather [--host-mb MB] [--calls N] [--contend] [--alloc-only]\n");
            return 2;
        }
    }
    okv_backend *be = NULL;
    struct okv_backend_params bp = {.n_threads = 0};
    if (okv_backend_create("cuda", &bp, &be) != OKV_OK)
        die("backend");
    const struct okv_backend_ops *o = be->ops;
    const int hd = 128, bss[] = {8, 32, 128};
    printf("kv_fetch gather, host tier %d MiB pinned+mapped, %d calls per point, ceiling %.1f GB/s (PCIe H2D)\n", host_mb, calls,
           PCIE_GBS);
    printf("%-9s %-10s %-8s %-6s %-10s %-8s %s\n", "unit KiB", "fetch MiB", "units", "CTAs", "GB/s", "% PCIe", "us/call");
    for (int bi = 0; bi < 3; bi++) {
        const int bs = bss[bi];
        const size_t unit = (size_t)2 * bs * hd * 2;
        const int host_blocks = (int)(((size_t)host_mb << 20) / unit);
        const int max_units = (int)(((size_t)32 << 20) / unit);
        /* group slots only to write the host tier through: 4096 tokens per step */
        const int wslots = 4096 / bs;
        struct okv_kv_geometry g = {.n_layers = 1, .n_group_slots = wslots, .n_sparse_units = max_units,
                                    .n_host_blocks = host_blocks, .block_size = bs, .n_kv_heads = 1, .head_dim = hd};
        okv_bkv *kv = NULL;
        const double ta = okv_now();
        if (o->kv_alloc(be, &g, &kv) != OKV_OK)
            die("kv_alloc");
        bool reg = false;
        const double pin_s = okv_cuda_kv_host_pin_seconds(kv, &reg);
        printf("host tier of %d MiB: kv_alloc %.2f s, of which pinning %.2f s (%s)\n", host_mb, okv_now() - ta, pin_s,
               reg ? "populated in parallel, registered" : "cudaHostAlloc");
        if (alloc_only) {
            const double tf = okv_now();
            o->kv_free(be, kv);
            printf("host tier of %d MiB: kv_free %.2f s\n", host_mb, okv_now() - tf);
            break;
        }
        /* fill the host tier with random data through kv_write */
        const int nt = wslots * bs;
        float *kh = malloc(sizeof(float) * (size_t)nt * hd);
        for (size_t i = 0; i < (size_t)nt * hd; i++)
            kh[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
        okv_bmem *k = NULL, *v = NULL;
        if (o->mem_alloc(be, (size_t)nt * hd, &k) != OKV_OK || o->mem_alloc(be, (size_t)nt * hd, &v) != OKV_OK)
            die("mem_alloc");
        o->mem_write(be, k, 0, kh, (size_t)nt * hd);
        o->mem_write(be, v, 0, kh, (size_t)nt * hd);
        int32_t *seq = calloc((size_t)nt, 4), *pos = malloc(4 * (size_t)nt), *slot = malloc(4 * (size_t)nt);
        int32_t *host = malloc(4 * (size_t)nt), kvlen[1] = {nt};
        for (int t = 0; t < nt; t++) {
            pos[t] = t;
            slot[t] = t;
        }
        for (int at = 0; at + bs <= host_blocks * bs; at += nt) {
            int n = host_blocks * bs - at < nt ? host_blocks * bs - at : nt;
            for (int t = 0; t < n; t++)
                host[t] = at + t;
            struct okv_step_meta m = {n, 1, seq, pos, slot, host, NULL, kvlen};
            if (o->step_begin(be, &m) != OKV_OK || o->kv_write(be, kv, 0, k, v) != OKV_OK)
                die("kv_write");
        }
        if (o->sync(be) != OKV_OK)
            die("sync");
        const size_t fetch_bytes[] = {(size_t)2 << 20, (size_t)32 << 20};
        for (int fi = 0; fi < 2; fi++) {
            const int n = (int)(fetch_bytes[fi] / unit);
            int32_t *src = malloc(4 * (size_t)n * calls), *dst = malloc(4 * (size_t)n);
            for (int i = 0; i < n * calls; i++)
                src[i] = (int32_t)(rnd() % (uint32_t)host_blocks);
            for (int i = 0; i < n; i++)   /* distinct destinations in random order */
                dst[i] = wslots + i;
            for (int i = n - 1; i > 0; i--) {
                int j = (int)(rnd() % (uint32_t)(i + 1)), t = dst[i];
                dst[i] = dst[j];
                dst[j] = t;
            }
            const int ctas[] = {0, 1, 2, 4, 8, 16, 32, 64, 132};
            for (size_t ci = 0; ci < sizeof ctas / sizeof ctas[0]; ci++) {
                okv_cuda_set_fetch_ctas(be, ctas[ci]);
                int pend;
                double stall;
                for (int w = 0; w < 3; w++)
                    if (o->kv_fetch(be, kv, 0, n, src + (size_t)w * n, dst) != OKV_OK)
                        die("kv_fetch");
                o->kv_fetch_wait(be, kv, 0, &pend, &stall);
                o->sync(be);
                double t0 = okv_now();
                for (int c = 0; c < calls; c++)
                    if (o->kv_fetch(be, kv, 0, n, src + (size_t)c * n, dst) != OKV_OK)
                        die("kv_fetch");
                o->kv_fetch_wait(be, kv, 0, &pend, &stall);
                if (o->sync(be) != OKV_OK)
                    die("sync");
                double dt = okv_now() - t0;
                double gbs = (double)n * unit * calls / dt / 1e9;
                printf("%-9zu %-10zu %-8d %-6d %-10.1f %-8.1f %.1f%s\n", unit >> 10, fetch_bytes[fi] >> 20, n,
                       okv_cuda_fetch_ctas_last(be), gbs, 100.0 * gbs / PCIE_GBS, dt / calls * 1e6,
                       ctas[ci] == 0 ? "   (policy)" : "");
            }
            okv_cuda_set_fetch_ctas(be, 0);
            free(src);
            free(dst);
        }
        if (contend && bi < 2)
            contention(be, kv, unit, host_blocks, wslots, max_units, calls);
        o->mem_free(be, k);
        o->mem_free(be, v);
        o->kv_free(be, kv);
        free(kh);
        free(seq);
        free(pos);
        free(slot);
        free(host);
    }
    okv_backend_free(be);
    return 0;
}
