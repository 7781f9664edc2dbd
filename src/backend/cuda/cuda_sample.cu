/* Sampling on the GPU: one CTA per row of logits, one token per row, one copy back.
 *
 * The reference is okv_sample_u (src/engine/sampling.c). Per row:
 *  1. max and argmax (lowest id on ties); greedy rows stop here.
 *  2. top_k: the value of the k-th largest logit, found by threshold selection (below);
 *     the candidates are the logits >= it.
 *  3. top_p: the smallest logit value v such that the softmax mass of the candidates
 *     >= v reaches top_p times the candidates' mass, by the same selection on masses;
 *     the candidates are the logits >= v.
 *  4. p_i = (float)(e_i / sum of e over the candidates), e_i = expf((l_i - max) / T);
 *     the walk in increasing id order: each thread sums the p_i of its contiguous
 *     chunk of ids, a block scan finds the chunk where the cumulative sum passes u,
 *     and its thread walks it (double sums, as the CPU's).
 * Row passes use 16-byte loads, four in flight per thread (row_for). A row is read
 * 3 times for temperature alone and 5 to 7 times with top_k / top_p (from L2 at
 * batch sizes whose rows fit it).
 * Threshold selection (thr_select) finds where a descending cumulative weight (count, or
 * mass in 2^-s fixed point, so that sums are exact and independent of order) reaches
 * a target: a pass builds a histogram of SAMP_BINS bins linear in the logit between
 * the range's bounds (the bin is a monotone function of the value, so the bins order
 * the logits); the bin holding the target is gathered into shared memory and sorted
 * (value descending, id ascending) when it holds at most SAMP_CAP logits, else its own
 * range is binned again.
 *
 * Differences from the CPU, by design: logits tied with the k-th largest (or with the
 * logit at which top_p is reached) are all kept, where the CPU keeps the lower ids only
 * (a few more candidates at exact ties); masses are float expf (the CPU uses double exp
 * with top_k or top_p), and the top_p decision uses masses in 2^-s fixed point
 * (s = 62 - bits of the vocabulary size), so a row whose cumulative mass lands within
 * ~1e-7 of top_p or of u may pick the neighbouring candidate. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define SAMP_THREADS 512
#define SAMP_WARPS (SAMP_THREADS / 32)
#define SAMP_BINS 2048
#define SAMP_CAP 2048   /* logits of one bin sorted in shared memory */

struct samp_row {
    float temperature;
    int32_t top_k;
    float top_p;
    int32_t pad;
    double u;
};

struct samp_smem {
    unsigned long long wsum[SAMP_BINS];   /* weights per bin */
    unsigned cnt[SAMP_BINS];              /* logits per bin */
    unsigned long long list[SAMP_CAP];    /* gathered bin: (~key << 32) | id */
    unsigned long long red_u[SAMP_WARPS];
    double red_d[SAMP_WARPS];
    float red_f[SAMP_WARPS];
    int red_i[SAMP_WARPS];
    unsigned red_k[SAMP_WARPS];
    unsigned long long b_above;
    unsigned b_bin, b_key, b_n;
};

/* logit -> unsigned key in the order of the floats (NaN above +inf) */
static __device__ __forceinline__ unsigned okey(float f)
{
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static __device__ __forceinline__ float okey_val(unsigned k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* f(i, x[i]) for the elements of a row this thread visits, in increasing i: 16-byte
 * loads, four in flight per thread (the passes are bound by L2 latency otherwise). */
template <typename F>
static __device__ __forceinline__ void row_for(const float *x, int n, F f)
{
    const int head = min(n, (int)(((16 - ((uintptr_t)x & 15)) & 15) >> 2));
    for (int i = threadIdx.x; i < head; i += SAMP_THREADS)
        f(i, x[i]);
    const float4 *x4 = (const float4 *)(x + head);
    const int n4 = (n - head) >> 2;
    int i4 = threadIdx.x;
    for (; i4 + 3 * SAMP_THREADS < n4; i4 += 4 * SAMP_THREADS) {
        const float4 a0 = __ldg(x4 + i4), a1 = __ldg(x4 + i4 + SAMP_THREADS), a2 = __ldg(x4 + i4 + 2 * SAMP_THREADS),
                     a3 = __ldg(x4 + i4 + 3 * SAMP_THREADS);
        const int i = head + 4 * i4, st = 4 * SAMP_THREADS;
        f(i, a0.x);
        f(i + 1, a0.y);
        f(i + 2, a0.z);
        f(i + 3, a0.w);
        f(i + st, a1.x);
        f(i + st + 1, a1.y);
        f(i + st + 2, a1.z);
        f(i + st + 3, a1.w);
        f(i + 2 * st, a2.x);
        f(i + 2 * st + 1, a2.y);
        f(i + 2 * st + 2, a2.z);
        f(i + 2 * st + 3, a2.w);
        f(i + 3 * st, a3.x);
        f(i + 3 * st + 1, a3.y);
        f(i + 3 * st + 2, a3.z);
        f(i + 3 * st + 3, a3.w);
    }
    for (; i4 < n4; i4 += SAMP_THREADS) {
        const float4 a = __ldg(x4 + i4);
        const int i = head + 4 * i4;
        f(i, a.x);
        f(i + 1, a.y);
        f(i + 2, a.z);
        f(i + 3, a.w);
    }
    for (int i = head + 4 * n4 + threadIdx.x; i < n; i += SAMP_THREADS)
        f(i, x[i]);
}

/* exclusive block scan of doubles; *incl receives this thread's inclusive value */
static __device__ double block_scan_d(struct samp_smem *s, double v, double *incl_out)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    double incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const double t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o)
            incl += t;
    }
    double excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0)
        excl = 0;
    __syncthreads();
    if (lane == 31)
        s->red_d[w] = incl;
    __syncthreads();
    double before = 0;
    for (int i = 0; i < w; i++)
        before += s->red_d[i];
    *incl_out = before + incl;
    return before + excl;
}

/* exclusive block scan of one value per thread; *total receives the sum */
static __device__ unsigned long long block_scan(struct samp_smem *s, unsigned long long v, unsigned long long *total)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    unsigned long long incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o)
            incl += t;
    }
    __syncthreads();
    if (lane == 31)
        s->red_u[w] = incl;
    __syncthreads();
    unsigned long long before = 0, all = 0;
    for (int i = 0; i < SAMP_WARPS; i++) {
        before += i < w ? s->red_u[i] : 0;
        all += s->red_u[i];
    }
    *total = all;
    return before + incl - v;
}

static __device__ double block_sum_d(struct samp_smem *s, double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        s->red_d[threadIdx.x >> 5] = v;
    __syncthreads();
    double t = 0;
    for (int i = 0; i < SAMP_WARPS; i++)
        t += s->red_d[i];
    return t;
}

static __device__ unsigned block_min_u(struct samp_smem *s, unsigned v)
{
    v = __reduce_min_sync(0xffffffffu, v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        s->red_k[threadIdx.x >> 5] = v;
    __syncthreads();
    for (int i = 0; i < SAMP_WARPS; i++)
        v = min(v, s->red_k[i]);
    return v;
}

static __device__ unsigned block_max_u(struct samp_smem *s, unsigned v)
{
    v = __reduce_max_sync(0xffffffffu, v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        s->red_k[threadIdx.x >> 5] = v;
    __syncthreads();
    for (int i = 0; i < SAMP_WARPS; i++)
        v = max(v, s->red_k[i]);
    return v;
}

struct samp_weight {
    bool mass;        /* false: every logit weighs 1 */
    float mx, inv_t;  /* mass: e = expf((l - mx) * inv_t) */
    float fp_scale;   /* mass: weight = e * fp_scale, truncated */
};

static __device__ __forceinline__ unsigned long long weight_of(const struct samp_weight &w, float v)
{
    if (!w.mass)
        return 1;
    return __float2ull_rz(expf((v - w.mx) * w.inv_t) * w.fp_scale);
}

/* Bins of one level of thr_select: linear in the value between the range's bounds,
 * or, when those are not finite or too close for a finite scale, linear in the key.
 * Both are non-increasing functions of the value: bin 0 holds the largest logits. */
struct samp_bins {
    bool by_key;
    unsigned hi, lo;
    float hhi, scale;
};

static __device__ struct samp_bins bins_of(unsigned lo, unsigned hi)
{
    struct samp_bins b;
    const float vlo = okey_val(lo), vhi = okey_val(hi);
    b.lo = lo;
    b.hi = hi;
    b.hhi = 0.5f * vhi;   /* halves: no overflow */
    b.scale = (float)SAMP_BINS / (b.hhi - 0.5f * vlo);
    b.by_key = !(isfinite(vlo) && isfinite(vhi) && b.scale > 0.0f && b.scale < 1e30f);
    return b;
}

static __device__ __forceinline__ int bin_of(const struct samp_bins &b, float v, unsigned k)
{
    if (b.by_key)
        return (int)(((unsigned long long)(b.hi - k) * SAMP_BINS) / ((unsigned long long)(b.hi - b.lo) + 1));
    /* explicit roundings: every pass must put a logit in the same bin */
    return (int)fminf(__fmul_rn(__fsub_rn(b.hhi, __fmul_rn(0.5f, v)), b.scale), (float)(SAMP_BINS - 1));
}

/* The key of the logit at which the cumulative weight of the logits with keys in
 * [lo, hi], taken by value descending (id ascending), first reaches the target:
 * `target`, or with frac >= 0, ceil(frac * their total weight). Returns lo when the
 * total falls short (keep them all). The whole block calls it. */
static __device__ unsigned thr_select(struct samp_smem *s, const float *x, int n, unsigned lo, unsigned hi,
                                      const struct samp_weight &w, unsigned long long target, double frac)
{
    const int tid = threadIdx.x;
    const unsigned lo0 = lo;
    unsigned long long above = 0;   /* weight of the logits above the range */
    for (int level = 0;; level++) {
        if (lo >= hi)
            return lo;   /* one value left: all its ties are kept */
        const struct samp_bins bs = bins_of(lo, hi);
        for (int i = tid; i < SAMP_BINS; i += SAMP_THREADS) {
            s->wsum[i] = 0;
            s->cnt[i] = 0;
        }
        __syncthreads();
        row_for(x, n, [&](int, float v) {
            const unsigned k = okey(v);
            if (k >= lo && k <= hi) {
                const int b = bin_of(bs, v, k);
                atomicAdd(&s->cnt[b], 1u);
                const unsigned long long wt = weight_of(w, v);
                if (wt)
                    atomicAdd(&s->wsum[b], wt);
            }
        });
        __syncthreads();
        /* the bin where above + cumulative weight reaches the target (bins of 4 per thread) */
        const int per_b = SAMP_BINS / SAMP_THREADS, b0 = tid * per_b;
        unsigned long long mine = 0, tot;
#pragma unroll
        for (int j = 0; j < per_b; j++)
            mine += s->wsum[b0 + j];
        unsigned long long cum = above + block_scan(s, mine, &tot);
        if (level == 0) {
            if (frac >= 0.0)
                target = (unsigned long long)ceil(frac * (double)tot);
            if (target > tot || target == 0)
                return lo0;
        }
        if (cum < target && cum + mine >= target) {
#pragma unroll
            for (int j = 0; j < per_b; j++) {
                if (cum + s->wsum[b0 + j] >= target) {
                    s->b_bin = b0 + j;
                    s->b_above = cum;
                    break;
                }
                cum += s->wsum[b0 + j];
            }
        }
        __syncthreads();
        const int bin = (int)s->b_bin;
        const unsigned bn = s->cnt[bin];
        above = s->b_above;
        if (bn > SAMP_CAP) {   /* too many: bin the bin's own range (strictly narrower) */
            unsigned klo = 0xffffffffu, khi = 0;
            row_for(x, n, [&](int, float v) {
                const unsigned k = okey(v);
                if (k >= lo && k <= hi && bin_of(bs, v, k) == bin) {
                    klo = min(klo, k);
                    khi = max(khi, k);
                }
            });
            lo = block_min_u(s, klo);
            hi = block_max_u(s, khi);
            continue;
        }
        /* gather the bin, sort it by value descending, id ascending, then scan its weights */
        if (tid == 0)
            s->b_n = 0;
        __syncthreads();
        row_for(x, n, [&](int i, float v) {
            const unsigned k = okey(v);
            if (k >= lo && k <= hi && bin_of(bs, v, k) == bin)
                s->list[atomicAdd(&s->b_n, 1u)] = ((unsigned long long)(~k) << 32) | (unsigned)i;
        });
        __syncthreads();
        int np = 1;
        while (np < (int)bn)
            np <<= 1;
        for (int i = (int)bn + tid; i < np; i += SAMP_THREADS)
            s->list[i] = ~0ull;
        for (int size = 2; size <= np; size <<= 1)
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                __syncthreads();
                for (int t = tid; t < np / 2; t += SAMP_THREADS) {
                    const int i = 2 * stride * (t / stride) + (t % stride), j = i + stride;
                    const bool up = (i & size) == 0;
                    const unsigned long long a = s->list[i], c = s->list[j];
                    if ((a > c) == up) {
                        s->list[i] = c;
                        s->list[j] = a;
                    }
                }
            }
        __syncthreads();
        const int per = SAMP_CAP / SAMP_THREADS, e0 = tid * per;
        unsigned long long wv[SAMP_CAP / SAMP_THREADS], msum = 0;
#pragma unroll
        for (int j = 0; j < per; j++) {
            wv[j] = e0 + j < (int)bn ? weight_of(w, okey_val(~(unsigned)(s->list[e0 + j] >> 32))) : 0;
            msum += wv[j];
        }
        cum = above + block_scan(s, msum, &tot);
        if (tid == 0)   /* never used: the target lies in this bin (integer sums are exact) */
            s->b_key = ~(unsigned)(s->list[bn - 1] >> 32);
        __syncthreads();
        if (cum < target && cum + msum >= target) {
#pragma unroll
            for (int j = 0; j < per; j++) {
                if (cum + wv[j] >= target) {
                    s->b_key = ~(unsigned)(s->list[e0 + j] >> 32);
                    break;
                }
                cum += wv[j];
            }
        }
        __syncthreads();
        return s->b_key;
    }
}

static __global__ void __launch_bounds__(SAMP_THREADS, 1)
sample_k(const float *logits, int vocab, const struct samp_row *rows, int32_t *out)
{
    __shared__ struct samp_smem s;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const float *x = logits + (size_t)blockIdx.x * vocab;
    const struct samp_row p = rows[blockIdx.x];
    /* 1. max, argmax (first index), min */
    float bv = -INFINITY, mn = INFINITY;
    int bi = 0x7fffffff;
    row_for(x, vocab, [&](int i, float v) {
        if (v > bv || (v == bv && i < bi)) {
            bv = v;
            bi = i;
        }
        mn = fminf(mn, v);
    });
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) {
            bv = ov;
            bi = oi;
        }
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    }
    if (lane == 0) {
        s.red_f[wid] = bv;
        s.red_i[wid] = bi;
        s.red_d[wid] = mn;
    }
    __syncthreads();
    bv = s.red_f[0];
    bi = s.red_i[0];
    mn = (float)s.red_d[0];
    for (int i = 1; i < SAMP_WARPS; i++) {
        if (s.red_f[i] > bv || (s.red_f[i] == bv && s.red_i[i] < bi)) {
            bv = s.red_f[i];
            bi = s.red_i[i];
        }
        mn = fminf(mn, (float)s.red_d[i]);
    }
    if (bi == 0x7fffffff)
        bi = 0;
    if (!(p.temperature > 0.0f)) {
        if (tid == 0)
            out[blockIdx.x] = bi;
        return;
    }
    /* 2, 3. candidates: the logits with keys >= lo */
    struct samp_weight w;
    w.mx = bv;
    w.inv_t = 1.0f / p.temperature;
    w.fp_scale = ldexpf(1.0f, 62 - (32 - __clz(vocab)));
    const unsigned hi = okey(bv);
    unsigned lo = okey(mn);
    if (p.top_k > 0 && p.top_k < vocab) {
        w.mass = false;
        lo = thr_select(&s, x, vocab, lo, hi, w, (unsigned long long)p.top_k, -1.0);
    }
    if (p.top_p > 0.0f && p.top_p < 1.0f) {
        w.mass = true;
        lo = thr_select(&s, x, vocab, lo, hi, w, 0, (double)p.top_p);
    }
    /* 4. renormalise; each thread sums the probabilities of its chunk of ids, a scan
     * finds the chunk where the cumulative sum passes u, its thread walks it */
    double e_sum = 0;
    row_for(x, vocab, [&](int, float v) {
        const unsigned k = okey(v);
        if (k >= lo && k <= hi)
            e_sum += (double)expf((v - bv) * w.inv_t);
    });
    const double inv_s = 1.0 / block_sum_d(&s, e_sum);
    const int ch = (vocab + SAMP_THREADS - 1) / SAMP_THREADS, c0 = min(vocab, tid * ch), c1 = min(vocab, c0 + ch);
    double acc = 0;
    int last = -1;
#pragma unroll 8
    for (int i = c0; i < c1; i++) {
        const float v = __ldg(x + i);
        const unsigned k = okey(v);
        const float pr = k >= lo && k <= hi ? (float)((double)expf((v - bv) * w.inv_t) * inv_s) : 0.0f;
        acc += (double)pr;
        last = pr > 0.0f ? i : last;
    }
    double incl;
    const double excl = block_scan_d(&s, acc, &incl);
    const unsigned first = block_min_u(&s, p.u < incl && last >= 0 ? (unsigned)tid : 0xffffffffu);
    if (first == 0xffffffffu) {   /* rounding left u beyond the total: the last candidate, as the CPU */
        const unsigned lt = block_max_u(&s, last >= 0 ? (unsigned)last : 0u);
        if (tid == 0)
            out[blockIdx.x] = lt;
        return;
    }
    if ((unsigned)tid != first)
        return;
    double cum = excl;
    for (int i = c0; i < c1; i++) {
        const float v = __ldg(x + i);
        const unsigned k = okey(v);
        const float pr = k >= lo && k <= hi ? (float)((double)expf((v - bv) * w.inv_t) * inv_s) : 0.0f;
        cum += (double)pr;
        if (pr > 0.0f && p.u < cum) {
            out[blockIdx.x] = i;
            return;
        }
    }
    out[blockIdx.x] = last;   /* rounding: the chunk's last candidate */
}

static enum okv_status sample_check(const char *op, const okv_bmem *logits, int n_rows, int vocab,
                                    const struct okv_sampling *params, const double *u)
{
    if (n_rows == 0)
        return OKV_OK;
    if (n_rows < 0 || vocab <= 0 || !logits || (size_t)n_rows * vocab > logits->n || !params || !u)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda %s: %d rows of %d logits do not fit the buffer (%zu)", op, n_rows,
                             vocab, logits ? logits->n : 0);
    if (vocab >= (1 << 30))
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda %s: vocabulary of %d", op, vocab);
    return OKV_OK;
}

/* Queue the sampling of n_rows > 0 rows on the compute stream: the rows' parameters go up
 * through the staging ring; the kernel writes the ids to d_out, or (d_out NULL) to room
 * after the parameters, copied back to its host side *h_ids. The ring region is committed. */
static enum okv_status sample_launch(struct cuda_ctx *c, const okv_bmem *logits, int n_rows, int vocab,
                                     const struct okv_sampling *params, const double *u, int32_t *d_out,
                                     int32_t **h_ids)
{
    const size_t up = sizeof(struct samp_row) * (size_t)n_rows;
    void *hv = NULL, *dv = NULL;
    enum okv_status st = okv_cuda_ring_alloc(c, up + (d_out ? 0 : sizeof(int32_t) * (size_t)n_rows), &hv, &dv);
    if (st != OKV_OK)
        return st;
    struct samp_row *hr = (struct samp_row *)hv;
    for (int i = 0; i < n_rows; i++) {
        hr[i].temperature = params[i].temperature;
        hr[i].top_k = params[i].top_k;
        hr[i].top_p = params[i].top_p;
        hr[i].pad = 0;
        hr[i].u = u[i];
    }
    int32_t *d_ids = d_out ? d_out : (int32_t *)((char *)dv + up);
    *h_ids = (int32_t *)((char *)hv + up);
    OKV_CU(cudaMemcpyAsync(dv, hv, up, cudaMemcpyHostToDevice, c->stream), "sample parameters upload");
    sample_k<<<(unsigned)n_rows, SAMP_THREADS, 0, c->stream>>>(logits->d, vocab, (const struct samp_row *)dv, d_ids);
    OKV_LAUNCHED("sample kernel");
    if (!d_out)
        OKV_CU(cudaMemcpyAsync(*h_ids, d_ids, sizeof(int32_t) * (size_t)n_rows, cudaMemcpyDeviceToHost, c->stream),
               "sample ids copy");
    return okv_cuda_ring_commit(c, c->stream);
}

extern "C" enum okv_status okv_cuda_sample(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                           const struct okv_sampling *params, const double *u, int32_t *out)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    enum okv_status st = sample_check("sample", logits, n_rows, vocab, params, u);
    if (st != OKV_OK)
        return st;
    if (n_rows > 0 && !out)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda sample: no output");
    if (n_rows == 0)
        return OKV_OK;
    int32_t *h_ids = NULL;
    if ((st = sample_launch(c, logits, n_rows, vocab, params, u, NULL, &h_ids)) != OKV_OK)
        return st;
    OKV_CU_WAIT(c, cudaStreamSynchronize(c->stream), "sample synchronize");
    memcpy(out, h_ids, sizeof(int32_t) * (size_t)n_rows);
    return OKV_OK;
}

/* Overlapped decoding: the ids stay in the slot's device buffer (embed_prev of the next
 * step reads them there) and are copied to its pinned buffer behind an event. The
 * engine collects a slot before it queues into it again (okv_engine_forward_queue), and
 * stream order keeps the step that reads the slot's ids ahead of the next write. */
extern "C" enum okv_status okv_cuda_sample_queue(okv_backend *be, const okv_bmem *logits, int n_rows, int vocab,
                                                 const struct okv_sampling *params, const double *u, int slot,
                                                 const int32_t *copy_rows, int n_copy)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    enum okv_status st = sample_check("sample_queue", logits, n_rows, vocab, params, u);
    if (st != OKV_OK)
        return st;
    if (slot < 0 || slot > 1 || n_copy < 0 || n_copy > n_rows || (n_copy && !copy_rows))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda sample_queue: slot %d, %d of %d rows to copy", slot, n_copy, n_rows);
    for (int i = 0; i < n_copy; i++)
        if (copy_rows[i] < 0 || copy_rows[i] >= n_rows)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda sample_queue: row %d of %d", copy_rows[i], n_rows);
    c->qids_n[slot] = 0;
    c->qrows_n[slot] = 0;
    if ((size_t)n_copy * vocab > c->qrows_cap[slot]) {   /* the pinned rows: the slot's last reader is collected */
        OKV_CU_WAIT(c, cudaStreamSynchronize(c->stream), "sample_queue rows grow");
        cudaFreeHost(c->qrows_h[slot]);
        c->qrows_h[slot] = NULL;
        c->qrows_cap[slot] = 0;
        const size_t cap = (size_t)(n_copy < 4 ? 4 : n_copy + n_copy / 2) * vocab;
        OKV_CU(cudaHostAlloc((void **)&c->qrows_h[slot], sizeof(float) * cap, cudaHostAllocDefault), "sample_queue rows (pinned)");
        c->qrows_cap[slot] = cap;
    }
    c->qrows_vocab[slot] = vocab;
    if (!c->qids_ev[slot])
        OKV_CU(cudaEventCreateWithFlags(&c->qids_ev[slot], cudaEventDisableTiming), "sample_queue event");
    if (n_rows > c->qids_cap[slot]) {
        OKV_CU_WAIT(c, cudaStreamSynchronize(c->stream), "sample_queue grow");
        cudaFree(c->qids_d[slot]);
        cudaFreeHost(c->qids_h[slot]);
        c->qids_d[slot] = c->qids_h[slot] = NULL;
        c->qids_cap[slot] = 0;
        const int cap = n_rows < 256 ? 256 : n_rows + n_rows / 2;
        OKV_CU(cudaMalloc((void **)&c->qids_d[slot], sizeof(int32_t) * (size_t)cap), "sample_queue ids (device)");
        OKV_CU(cudaHostAlloc((void **)&c->qids_h[slot], sizeof(int32_t) * (size_t)cap, cudaHostAllocDefault),
               "sample_queue ids (pinned)");
        c->qids_cap[slot] = cap;
    }
    if (n_rows > 0) {
        int32_t *h_ids = NULL;
        if ((st = sample_launch(c, logits, n_rows, vocab, params, u, c->qids_d[slot], &h_ids)) != OKV_OK)
            return st;
        OKV_CU(cudaMemcpyAsync(c->qids_h[slot], c->qids_d[slot], sizeof(int32_t) * (size_t)n_rows, cudaMemcpyDeviceToHost,
                               c->stream), "sample_queue ids copy");
    }
    /* the rows (the sampling kernel only reads them) behind the ids, so that the next step's
     * embedding does not wait for them; stream order keeps them ahead of the next step's logits,
     * and the slot's event covers them */
    for (int i = 0; i < n_copy; i++)
        OKV_CU(cudaMemcpyAsync(c->qrows_h[slot] + (size_t)i * vocab, logits->d + (size_t)copy_rows[i] * vocab,
                               sizeof(float) * (size_t)vocab, cudaMemcpyDeviceToHost, c->stream), "sample_queue row copy");
    OKV_CU(cudaEventRecord(c->qids_ev[slot], c->stream), "sample_queue event");
    c->qids_n[slot] = n_rows;
    c->qrows_n[slot] = n_copy;
    return OKV_OK;
}

extern "C" enum okv_status okv_cuda_sample_collect(okv_backend *be, int slot, int32_t *out, int n_rows, float *rows_out,
                                                   int n_copy)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    if (slot < 0 || slot > 1 || n_rows < 0 || n_rows > c->qids_n[slot] || !c->qids_ev[slot] || n_copy != c->qrows_n[slot])
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda sample_collect: slot %d holds %d ids and %d rows, not %d and %d", slot,
                             slot < 0 || slot > 1 ? 0 : c->qids_n[slot], slot < 0 || slot > 1 ? 0 : c->qrows_n[slot], n_rows,
                             n_copy);
    OKV_CU_WAIT(c, cudaEventSynchronize(c->qids_ev[slot]), "sample_collect wait");
    memcpy(out, c->qids_h[slot], sizeof(int32_t) * (size_t)n_rows);
    if (n_copy && rows_out)
        memcpy(rows_out, c->qrows_h[slot], sizeof(float) * (size_t)n_copy * (size_t)c->qrows_vocab[slot]);
    return OKV_OK;
}

extern "C" void okv_cuda_sample_free(struct cuda_ctx *c)
{
    for (int i = 0; i < 2; i++) {
        cudaFree(c->qids_d[i]);
        cudaFreeHost(c->qids_h[i]);
        if (c->qids_ev[i])
            cudaEventDestroy(c->qids_ev[i]);
        c->qids_d[i] = c->qids_h[i] = NULL;
        c->qids_ev[i] = NULL;
        c->qids_n[i] = c->qids_cap[i] = 0;
        cudaFreeHost(c->qrows_h[i]);
        c->qrows_h[i] = NULL;
        c->qrows_cap[i] = 0;
        c->qrows_n[i] = 0;
    }
}
