/* cuda_gather: kv_fetch of scattered units from the pinned host tier into HBM on the
 * CUDA backend (one gather kernel per call, 16-byte loads from mapped host memory).
 *
 *   cuda_gather [--host-mb 512] [--calls 40]
 *
 * For units of 4, 16 and 64 KiB (K+V of one block and KV head: head_dim 128,
 * blocks of 8, 32, 128 tokens), fetches of 2 MiB and 32 MiB of random host units
 * into random device units, for several grid sizes (the policy's and forced ones).
 * GB/s counts the unit bytes moved, against the 55.4 GB/s host-to-device ceiling
 * measured on the H200 machine (REFERENCE.md). Time: `calls` back-to-back fetches,
 * then kv_fetch_wait + sync, on the host clock. */
#include "backend/cuda/cuda_bench.h"
#include "oasiskv/backend.h"

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

int main(int argc, char **argv)
{
    int host_mb = 512, calls = 40;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--host-mb"))
            host_mb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--calls"))
            calls = atoi(argv[i + 1]);
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
        if (o->kv_alloc(be, &g, &kv) != OKV_OK)
            die("kv_alloc");
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
