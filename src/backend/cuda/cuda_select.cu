/* Block selection on the GPU: the Quest bound sum_d max(q_d*kmin_d, q_d*kmax_d) of
 * every candidate host block per KV head (one warp per candidate, maximised over the
 * GQA group's query heads and the request's rows), then the top k per KV head by a
 * bitonic sort in shared memory of (score descending, block id ascending) keys, the
 * order of the CPU reference. Only the k ids per head (and the scores, when asked)
 * come back to the host. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEL_WARPS 8
#define SEL_SORT_MAX 16384   /* candidates sorted on the GPU; more fall back to the host */

static __global__ void __launch_bounds__(SEL_WARPS * 32)
quest_k(const float *q, const float *summ, const int32_t *rows, int n_rows, const int32_t *cand, int n_cand, int n_heads,
        int nkv, int hd, float *scores)
{
    const int h = blockIdx.y, lane = threadIdx.x & 31;
    const int c = blockIdx.x * SEL_WARPS + (threadIdx.x >> 5);
    if (c >= n_cand)
        return;
    const float *kmin = summ + ((size_t)cand[c] * nkv + h) * 2 * hd, *kmax = kmin + hd;
    float mn[8], mx[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int d = lane + 32 * i;
        mn[i] = d < hd ? kmin[d] : 0.f;
        mx[i] = d < hd ? kmax[d] : 0.f;
    }
    const int group = n_heads / nkv;
    float best = -INFINITY;
    for (int r = 0; r < n_rows; r++)
        for (int g = 0; g < group; g++) {
            const float *qv = q + ((size_t)rows[r] * n_heads + (size_t)h * group + g) * hd;
            float s = 0.f;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int d = lane + 32 * i;
                if (d < hd)
                    s += fmaxf(qv[d] * mn[i], qv[d] * mx[i]);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                s += __shfl_xor_sync(0xffffffffu, s, o);
            best = fmaxf(best, s);
        }
    if (lane == 0)
        scores[(size_t)h * n_cand + c] = best;
}

static __device__ __forceinline__ unsigned long long sort_key(float f, int32_t id)
{
    const unsigned u = __float_as_uint(f);
    const unsigned asc = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   /* ascending order of floats */
    return ((unsigned long long)(~asc) << 32) | (unsigned)id;          /* score descending, id ascending */
}

static __global__ void topk_k(const float *scores, const int32_t *cand, int n_cand, int k, int n_pow2, int32_t *out)
{
    extern __shared__ unsigned long long keys[];
    const int h = blockIdx.x;
    for (int i = threadIdx.x; i < n_pow2; i += blockDim.x)
        keys[i] = i < n_cand ? sort_key(scores[(size_t)h * n_cand + i], cand[i]) : ~0ull;
    for (int size = 2; size <= n_pow2; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int i = threadIdx.x; i < n_pow2; i += blockDim.x) {
                const int j = i ^ stride;
                if (j > i) {
                    const bool up = (i & size) == 0;
                    const unsigned long long x = keys[i], y = keys[j];
                    if ((x > y) == up) {
                        keys[i] = y;
                        keys[j] = x;
                    }
                }
            }
        }
    __syncthreads();
    for (int i = threadIdx.x; i < k; i += blockDim.x)
        out[(size_t)h * k + i] = (int32_t)(keys[i] & 0xffffffffu);
}

struct scored { float s; int32_t id; };

static int scored_cmp(const void *a, const void *b)
{
    const struct scored *x = (const struct scored *)a, *y = (const struct scored *)b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static enum okv_status sel_stage(struct cuda_ctx *c, size_t n)
{
    if (n <= c->sel_cap)
        return OKV_OK;
    if (c->sel_h)
        cudaFreeHost(c->sel_h);
    if (c->sel_scores_h)
        cudaFreeHost(c->sel_scores_h);
    c->sel_h = NULL;
    c->sel_scores_h = NULL;
    c->sel_cap = 0;
    OKV_CU(cudaHostAlloc((void **)&c->sel_h, n * sizeof(int32_t), cudaHostAllocDefault), "select staging (pinned)");
    OKV_CU(cudaHostAlloc((void **)&c->sel_scores_h, n * sizeof(float), cudaHostAllocDefault), "select staging (pinned)");
    c->sel_cap = n;
    return OKV_OK;
}

extern "C" enum okv_status okv_cuda_select_blocks(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                                  const struct okv_select_req *req, int32_t *out, float *scores)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    const int hd = kv->g.head_dim, nkv = kv->g.n_kv_heads;
    if (!kv->summ || req->k > req->n_cand || req->k < 0 || req->n_cand < 0 || req->n_rows < 0 || n_heads <= 0 ||
        n_heads % nkv || layer < 0 || layer >= kv->g.n_layers)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: bad request (k %d of %d candidates)", req->k, req->n_cand);
    for (int r = 0; r < req->n_rows; r++)
        if (req->rows[r] < 0 || (size_t)(req->rows[r] + 1) * n_heads * hd > q->n)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: row %d out of range", req->rows[r]);
    for (int i = 0; i < req->n_cand; i++)
        if (req->cand_host[i] < 0 || req->cand_host[i] >= kv->g.n_host_blocks)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: host block %d out of range", req->cand_host[i]);
    if (req->n_cand == 0)
        return OKV_OK;
    const int n_cand = req->n_cand, k = req->k;
    const size_t n_sc = (size_t)nkv * n_cand;
    enum okv_status st;
    /* device: rows, cand, then ids [nkv][k] */
    void *h = NULL, *d = NULL;
    const size_t up = sizeof(int32_t) * ((size_t)req->n_rows + n_cand);
    if ((st = okv_cuda_ring_alloc(c, up + sizeof(int32_t) * (size_t)nkv * k, &h, &d)) != OKV_OK)
        return st;
    memcpy(h, req->rows, sizeof(int32_t) * (size_t)req->n_rows);
    memcpy((int32_t *)h + req->n_rows, req->cand_host, sizeof(int32_t) * (size_t)n_cand);
    OKV_CU(cudaMemcpyAsync(d, h, up, cudaMemcpyHostToDevice, c->stream), "select request upload");
    const int32_t *d_rows = (const int32_t *)d, *d_cand = d_rows + req->n_rows;
    int32_t *d_ids = (int32_t *)d + req->n_rows + n_cand;
    float *d_sc = NULL;
    if ((st = okv_cuda_scratch(c, n_sc, &d_sc)) != OKV_OK)
        return st;
    const float *summ = kv->summ + (size_t)layer * kv->g.n_host_blocks * nkv * 2 * hd;
    dim3 grid((unsigned)((n_cand + SEL_WARPS - 1) / SEL_WARPS), (unsigned)nkv);
    quest_k<<<grid, SEL_WARPS * 32, 0, c->stream>>>(q->d, summ, d_rows, req->n_rows, d_cand, n_cand, n_heads, nkv, hd, d_sc);
    OKV_LAUNCHED("select score kernel");
    const bool gpu_sort = n_cand <= SEL_SORT_MAX;
    if ((st = sel_stage(c, gpu_sort ? (size_t)nkv * k + 1 : 1)) != OKV_OK)
        return st;
    if (gpu_sort && k > 0) {
        int n_pow2 = 1;
        while (n_pow2 < n_cand)
            n_pow2 <<= 1;
        const size_t smem = sizeof(unsigned long long) * (size_t)n_pow2;
        static size_t smem_set;
        if (smem > 48 * 1024 && smem > smem_set) {
            OKV_CU(cudaFuncSetAttribute(topk_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "top-k smem limit");
            smem_set = smem;
        }
        topk_k<<<nkv, 1024, smem, c->stream>>>(d_sc, d_cand, n_cand, k, n_pow2, d_ids);
        OKV_LAUNCHED("select top-k kernel");
        OKV_CU(cudaMemcpyAsync(c->sel_h, d_ids, sizeof(int32_t) * (size_t)nkv * k, cudaMemcpyDeviceToHost, c->stream),
               "select ids copy");
    }
    if ((st = okv_cuda_ring_commit(c, c->stream)) != OKV_OK)
        return st;
    float *hsc = NULL;
    if (scores || !gpu_sort) {
        hsc = scores ? scores : (float *)okv_malloc(sizeof(float) * n_sc, OKV_TAG_BACKEND);
        if (!hsc)
            return okv_set_error(OKV_ERR_NO_MEMORY, "cuda select_blocks: out of host memory");
        cudaError_t e = cudaMemcpyAsync(hsc, d_sc, sizeof(float) * n_sc, cudaMemcpyDeviceToHost, c->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) {
            if (!scores)
                okv_free(hsc);
            return okv_cuda_err(e, "select scores copy", __FILE__, __LINE__);
        }
    } else {
        OKV_CU(cudaStreamSynchronize(c->stream), "select synchronize");
    }
    if (gpu_sort) {
        memcpy(out, c->sel_h, sizeof(int32_t) * (size_t)nkv * k);
    } else {
        struct scored *sc = (struct scored *)okv_malloc(sizeof *sc * (size_t)n_cand, OKV_TAG_BACKEND);
        if (!sc) {
            if (!scores)
                okv_free(hsc);
            return okv_set_error(OKV_ERR_NO_MEMORY, "cuda select_blocks: out of host memory");
        }
        for (int hh = 0; hh < nkv; hh++) {
            for (int i = 0; i < n_cand; i++) {
                sc[i].s = hsc[(size_t)hh * n_cand + i];
                sc[i].id = req->cand_host[i];
            }
            qsort(sc, (size_t)n_cand, sizeof *sc, scored_cmp);
            for (int i = 0; i < k; i++)
                out[(size_t)hh * k + i] = sc[i].id;
        }
        okv_free(sc);
    }
    if (!scores && hsc)
        okv_free(hsc);
    return OKV_OK;
}
