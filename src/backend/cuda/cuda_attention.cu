/* Attention over per-(sequence, KV head) block lists on the GPU: flash-decoding.
 *
 * Work item = (list (s, h), a range of its blocks, a tile of up to ATT_RQ query
 * vectors). The query vectors of a list are all (row of s, query head of h's GQA
 * group) pairs, so one pass over the K/V of the range serves the whole group and
 * every query row of the sequence (verify, prefill chunks): K/V are read from HBM
 * once per tile instead of once per query head.
 *
 * A CTA is 4 warps; each warp takes 32-key chunks of the range in turn: it copies the
 * chunk's K and V rows to shared memory (cp.async, 16 B, zero fill for keys past the
 * sequence or past the tile's last position), computes the scores with one lane per
 * key, updates its online softmax (running max, per-lane sums), and accumulates P.V
 * with each lane owning head_dim/32 output dims. The warps' states are merged in
 * shared memory; a list split into several ranges writes partial states (acc, max,
 * sum) that a second kernel merges with the log-sum-exp rule.
 *
 * Masking: the query of a row at position p reads key positions kp <= p and
 * kp < seq_kv_len[s] (block b holds positions blk_index[b]*bs ...).
 *
 * The plan (block lists + work items) is uploaded in one copy; when a call's lists
 * equal the previous call's in the same step (dense layers), it is reused. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <string.h>

#define ATT_W 4      /* warps per CTA */
#define ATT_RQ 8     /* query vectors per work item */

struct att_work { int list, b0, nb, qt, part; };
struct att_merge { int list, qt, first, count; };

struct att_args {
    const float *q;
    float *out;
    const okv_bf16 *dev;          /* device tier base; units resolved with layer_off / stage_off */
    long long layer_off, stage_off;
    const int32_t *blk_start, *blk_unit, *blk_index;
    const struct att_work *work;
    const struct att_merge *merge;
    const int32_t *seq_row_off, *seq_rows, *tok_pos, *seq_kv_len;
    float *part_acc;   /* [parts][ATT_RQ][hd] */
    float *part_ml;    /* [parts][ATT_RQ][2] */
    int n_heads, nkv, group, hd, bs;
    size_t unit_elems;
    float scale;
};

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}

static __device__ __forceinline__ void cp_async_wait_all()
{
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

static __device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* query vector r of tile qt of list (s, h): its row and query head */
static __device__ __forceinline__ void vec_of(const struct att_args &a, int r0, int h, int qt, int r, int *row, int *qh)
{
    const int v = qt * ATT_RQ + r;
    *row = a.seq_rows[r0 + v / a.group];
    *qh = h * a.group + v % a.group;
}

static size_t attn_smem_bytes(int hd)
{
    return sizeof(float) * ((size_t)ATT_RQ * hd + (size_t)ATT_W * ATT_RQ * 32 + (size_t)2 * ATT_W * ATT_RQ) +
           sizeof(okv_bf16) * (size_t)ATT_W * 32 * (2 * hd + 8);
}

template <int DPL>
static __global__ void __launch_bounds__(ATT_W * 32) attn_k(const struct att_args a)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const int hd = a.hd, bs = a.bs, rowst = hd + 8;
    float *sq = (float *)smem;                        /* [RQ][hd], scaled */
    float *sp = sq + ATT_RQ * hd;                     /* [W][RQ][32] probabilities */
    float *sml = sp + ATT_W * ATT_RQ * 32;            /* [W][RQ][2] max, sum */
    okv_bf16 *skv = (okv_bf16 *)(sml + 2 * ATT_W * ATT_RQ);   /* [W]: K [32][rowst] (padded), V [32][hd] */

    const struct att_work w = a.work[blockIdx.x];
    const int s = w.list / a.nkv, h = w.list % a.nkv;
    const int r0 = a.seq_row_off[s], nq = a.seq_row_off[s + 1] - r0;
    const int nr = min(ATT_RQ, nq * a.group - w.qt * ATT_RQ);
    const int kv_len = a.seq_kv_len[s];

    for (int i = threadIdx.x; i < nr * hd; i += blockDim.x) {
        int row, qh;
        vec_of(a, r0, h, w.qt, i / hd, &row, &qh);
        sq[i] = a.q[((size_t)row * a.n_heads + qh) * hd + i % hd] * a.scale;
    }
    int pos[ATT_RQ];
    int pmax = -1;
#pragma unroll
    for (int r = 0; r < ATT_RQ; r++) {
        pos[r] = -1;
        if (r < nr) {
            int row, qh;
            vec_of(a, r0, h, w.qt, r, &row, &qh);
            pos[r] = a.tok_pos[row];
            pmax = max(pmax, pos[r]);
        }
    }
    const int lim = min(kv_len, pmax + 1);   /* keys at or past lim are masked for every vector */
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    okv_bf16 *wk = skv + (size_t)warp * 32 * (rowst + hd), *wv = wk + 32 * rowst;
    float *wp = sp + warp * ATT_RQ * 32;
    float m[ATT_RQ], l[ATT_RQ], acc[ATT_RQ][DPL];
#pragma unroll
    for (int r = 0; r < ATT_RQ; r++) {
        m[r] = -INFINITY;
        l[r] = 0.f;
#pragma unroll
        for (int i = 0; i < DPL; i++)
            acc[r][i] = 0.f;
    }
    const int base = a.blk_start[w.list] + w.b0;
    const int nkeys = w.nb * bs;
    const int P = hd / 8;                 /* 16-byte pieces per row */
    const int rpi = 32 / P;               /* rows per load iteration */
    const int lrow = lane / P, lcol = lane % P;
    const bool lact = lane < rpi * P;
    const bool own = lane * DPL < hd;     /* lane owns output dims [lane*DPL, +DPL) */

    for (int c0 = warp * 32; c0 < nkeys; c0 += ATT_W * 32) {
        const int kj = c0 + lane;
        int kp = 0x7fffffff;
        long long koff = 0;
        if (kj < nkeys) {
            const int b = kj / bs, off = kj - b * bs;
            kp = a.blk_index[base + b] * bs + off;
            koff = okv_cuda_unit_global(a.blk_unit[base + b], a.layer_off, a.stage_off) * (long long)a.unit_elems +
                   (long long)off * hd;
        }
        const bool valid = kp < lim;
        const unsigned vmask = __ballot_sync(0xffffffffu, valid);
        if (!vmask)
            continue;
        for (int it = 0; it * rpi < 32; it++) {
            const int row = it * rpi + lrow;
            const long long ro = __shfl_sync(0xffffffffu, koff, row & 31);
            if (lact && row < 32) {
                const bool rv = (vmask >> row) & 1u;
                const okv_bf16 *src = a.dev + (rv ? ro + lcol * 8 : 0);
                cp_async16(wk + row * rowst + lcol * 8, src, rv ? 16 : 0);
                cp_async16(wv + row * hd + lcol * 8, rv ? src + (size_t)bs * hd : src, rv ? 16 : 0);
            }
        }
        cp_async_wait_all();
        __syncwarp();

        /* scores: lane = key */
        float sc[ATT_RQ];
#pragma unroll
        for (int r = 0; r < ATT_RQ; r++)
            sc[r] = 0.f;
        const okv_bf16 *krow = wk + lane * rowst;
        for (int d = 0; d < hd; d += 8) {
            const uint4 raw = *(const uint4 *)(krow + d);
            const __nv_bfloat162 *p2 = (const __nv_bfloat162 *)&raw;
            const float2 k0 = __bfloat1622float2(p2[0]), k1 = __bfloat1622float2(p2[1]);
            const float2 k2 = __bfloat1622float2(p2[2]), k3 = __bfloat1622float2(p2[3]);
#pragma unroll
            for (int r = 0; r < ATT_RQ; r++) {
                if (r < nr) {
                    const float4 qa = *(const float4 *)(sq + r * hd + d), qb = *(const float4 *)(sq + r * hd + d + 4);
                    sc[r] += qa.x * k0.x + qa.y * k0.y + qa.z * k1.x + qa.w * k1.y + qb.x * k2.x + qb.y * k2.y + qb.z * k3.x +
                             qb.w * k3.y;
                }
            }
        }
        /* online softmax */
#pragma unroll
        for (int r = 0; r < ATT_RQ; r++) {
            if (r < nr) {
                const float sv = (valid && kp <= pos[r]) ? sc[r] : -INFINITY;
                const float mn = fmaxf(m[r], warp_max(sv));
                const float p = mn == -INFINITY ? 0.f : __expf(sv - mn);
                const float alpha = m[r] == -INFINITY ? 0.f : __expf(m[r] - mn);
                l[r] = l[r] * alpha + p;
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    acc[r][i] *= alpha;
                m[r] = mn;
                wp[r * 32 + lane] = p;
            }
        }
        __syncwarp();
        /* P.V: lane owns dims [lane*DPL, +DPL) */
        const int nv = 32 - __clz(vmask);
        if (own) {
            for (int j = 0; j < nv; j++) {
                const okv_bf16 *vrow = wv + j * hd + lane * DPL;
                float vf[DPL];
                if (DPL == 1) {
                    vf[0] = __bfloat162float(vrow[0]);
                } else {
#pragma unroll
                    for (int i = 0; i < DPL; i += 2) {
                        const float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)(vrow + i));
                        vf[i] = f.x;
                        vf[i + 1] = f.y;
                    }
                }
#pragma unroll
                for (int r = 0; r < ATT_RQ; r++) {
                    if (r < nr) {
                        const float p = wp[r * 32 + j];
#pragma unroll
                        for (int i = 0; i < DPL; i++)
                            acc[r][i] += p * vf[i];
                    }
                }
            }
        }
        __syncwarp();
    }

    /* merge the warps */
#pragma unroll
    for (int r = 0; r < ATT_RQ; r++)
        l[r] = warp_sum(l[r]);
    __syncthreads();
    float *macc = (float *)skv;   /* [W][RQ][hd] */
#pragma unroll
    for (int r = 0; r < ATT_RQ; r++) {
        if (r < nr) {
            if (own) {
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    macc[((size_t)warp * ATT_RQ + r) * hd + lane * DPL + i] = acc[r][i];
            }
            if (lane == 0) {
                sml[(warp * ATT_RQ + r) * 2] = m[r];
                sml[(warp * ATT_RQ + r) * 2 + 1] = l[r];
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nr * hd; i += blockDim.x) {
        const int r = i / hd, d = i % hd;
        float M = -INFINITY;
#pragma unroll
        for (int ww = 0; ww < ATT_W; ww++)
            M = fmaxf(M, sml[(ww * ATT_RQ + r) * 2]);
        float A = 0.f, L = 0.f;
        if (M != -INFINITY) {
#pragma unroll
            for (int ww = 0; ww < ATT_W; ww++) {
                const float mw = sml[(ww * ATT_RQ + r) * 2];
                const float e = mw == -INFINITY ? 0.f : __expf(mw - M);
                L += e * sml[(ww * ATT_RQ + r) * 2 + 1];
                A += e * macc[((size_t)ww * ATT_RQ + r) * hd + d];
            }
        }
        if (w.part < 0) {
            int row, qh;
            vec_of(a, r0, h, w.qt, r, &row, &qh);
            a.out[((size_t)row * a.n_heads + qh) * hd + d] = L > 0.f ? A / L : 0.f;
        } else {
            a.part_acc[((size_t)w.part * ATT_RQ + r) * hd + d] = A;
            if (d == 0) {
                a.part_ml[((size_t)w.part * ATT_RQ + r) * 2] = M;
                a.part_ml[((size_t)w.part * ATT_RQ + r) * 2 + 1] = L;
            }
        }
    }
}

/* log-sum-exp merge of the partial states of lists split into ranges */
static __global__ void attn_merge_k(const struct att_args a)
{
    const struct att_merge mi = a.merge[blockIdx.x];
    const int s = mi.list / a.nkv, h = mi.list % a.nkv, hd = a.hd;
    const int r0 = a.seq_row_off[s], nq = a.seq_row_off[s + 1] - r0;
    const int nr = min(ATT_RQ, nq * a.group - mi.qt * ATT_RQ);
    for (int i = threadIdx.x; i < nr * hd; i += blockDim.x) {
        const int r = i / hd, d = i % hd;
        float M = -INFINITY;
        for (int j = 0; j < mi.count; j++)
            M = fmaxf(M, a.part_ml[((size_t)(mi.first + j) * ATT_RQ + r) * 2]);
        float A = 0.f, L = 0.f;
        if (M != -INFINITY) {
            for (int j = 0; j < mi.count; j++) {
                const size_t pr = (size_t)(mi.first + j) * ATT_RQ + r;
                const float mj = a.part_ml[pr * 2];
                const float e = mj == -INFINITY ? 0.f : __expf(mj - M);
                L += e * a.part_ml[pr * 2 + 1];
                A += e * a.part_acc[pr * hd + d];
            }
        }
        int row, qh;
        vec_of(a, r0, h, mi.qt, r, &row, &qh);
        a.out[((size_t)row * a.n_heads + qh) * hd + d] = L > 0.f ? A / L : 0.f;
    }
}

/* ---- host side: the plan ---- */

void okv_cuda_attn_cache_free(struct cuda_ctx *c)
{
    struct cuda_attn_cache *ac = &c->attn;
    okv_free(ac->h_start);
    okv_free(ac->h_unit);
    okv_free(ac->h_index);
    if (ac->d_plan)
        cudaFree(ac->d_plan);
    if (ac->h_stage)
        cudaFreeHost(ac->h_stage);
    if (ac->stage_ev)
        cudaEventDestroy(ac->stage_ev);
    memset(ac, 0, sizeof *ac);
}

static bool plan_matches(const struct cuda_attn_cache *ac, const okv_bkv *kv, uint64_t gen, int n_heads, int n_lists,
                         int n_blocks, const struct okv_attn_blocks *b)
{
    return ac->valid && ac->kv == kv && ac->gen == gen && ac->n_heads == n_heads && ac->n_lists == n_lists && ac->n_blocks == n_blocks &&
           !memcmp(ac->h_start, b->blk_start, sizeof(int32_t) * (size_t)(n_lists + 1)) &&
           !memcmp(ac->h_unit, b->blk_unit, sizeof(int32_t) * (size_t)n_blocks) &&
           !memcmp(ac->h_index, b->blk_index, sizeof(int32_t) * (size_t)n_blocks);
}

static enum okv_status ensure_host(int32_t **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return OKV_OK;
    okv_free(*p);
    *cap = 0;
    *p = (int32_t *)okv_malloc(sizeof(int32_t) * (n + n / 2 + 16), OKV_TAG_BACKEND);
    if (!*p)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda attention: out of host memory");
    *cap = n + n / 2 + 16;
    return OKV_OK;
}

/* Build and upload the plan for these lists. */
static enum okv_status build_plan(struct cuda_ctx *c, const okv_bkv *kv, const struct okv_attn_blocks *b, int n_heads,
                                  int n_lists, int n_blocks)
{
    struct cuda_attn_cache *ac = &c->attn;
    const int nkv = kv->g.n_kv_heads, group = n_heads / nkv, bs = kv->g.block_size;
    const int32_t *roff = c->step.h_row_off;
    /* sizes */
    long long total_keys = 0;
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv, nq = roff[s + 1] - roff[s];
        const int nqt = (nq * group + ATT_RQ - 1) / ATT_RQ;
        total_keys += (long long)(b->blk_start[li + 1] - b->blk_start[li]) * bs * nqt;
    }
    const long long target = (long long)c->n_sms * 4;
    long long kpc = (total_keys + target - 1) / target;
    if (kpc < 256)
        kpc = 256;
    const int bpc = (int)((kpc + bs - 1) / bs);
    int n_work = 0, n_merge = 0;
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv, nq = roff[s + 1] - roff[s];
        const int nqt = (nq * group + ATT_RQ - 1) / ATT_RQ;
        const int nb = b->blk_start[li + 1] - b->blk_start[li];
        const int ns = nb > bpc ? (nb + bpc - 1) / bpc : 1;
        n_work += ns * nqt;
        if (ns > 1)
            n_merge += nqt;
    }
    /* packed: start, unit, index, work, merge */
    const size_t off_start = 0;
    const size_t off_unit = off_start + (((size_t)(n_lists + 1) * 4 + 15) & ~(size_t)15);
    const size_t off_index = off_unit + (((size_t)n_blocks * 4 + 15) & ~(size_t)15);
    const size_t off_work = off_index + (((size_t)n_blocks * 4 + 15) & ~(size_t)15);
    const size_t off_merge = off_work + (((size_t)n_work * sizeof(struct att_work) + 15) & ~(size_t)15);
    const size_t bytes = off_merge + (size_t)n_merge * sizeof(struct att_merge) + 16;
    if (!ac->stage_ev)
        OKV_CU(cudaEventCreateWithFlags(&ac->stage_ev, cudaEventDisableTiming), "attention plan event");
    OKV_CU(cudaEventSynchronize(ac->stage_ev), "attention plan staging wait");
    if (bytes > ac->h_stage_cap) {
        if (ac->h_stage)
            cudaFreeHost(ac->h_stage);
        ac->h_stage = NULL;
        ac->h_stage_cap = 0;
        OKV_CU(cudaHostAlloc((void **)&ac->h_stage, bytes + bytes / 2, cudaHostAllocDefault), "attention plan staging (pinned)");
        ac->h_stage_cap = bytes + bytes / 2;
    }
    if (bytes > ac->d_cap) {
        OKV_CU(cudaStreamSynchronize(c->stream), "attention plan grow");
        if (ac->d_plan)
            cudaFree(ac->d_plan);
        ac->d_plan = NULL;
        ac->d_cap = 0;
        OKV_CU(cudaMalloc((void **)&ac->d_plan, bytes + bytes / 2), "attention plan (device)");
        ac->d_cap = bytes + bytes / 2;
    }
    char *h = ac->h_stage;
    memcpy(h + off_start, b->blk_start, sizeof(int32_t) * (size_t)(n_lists + 1));
    memcpy(h + off_unit, b->blk_unit, sizeof(int32_t) * (size_t)n_blocks);
    memcpy(h + off_index, b->blk_index, sizeof(int32_t) * (size_t)n_blocks);
    struct att_work *wk = (struct att_work *)(h + off_work);
    struct att_merge *mg = (struct att_merge *)(h + off_merge);
    int iw = 0, im = 0, parts = 0;
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv, nq = roff[s + 1] - roff[s];
        const int nqt = (nq * group + ATT_RQ - 1) / ATT_RQ;
        const int nb = b->blk_start[li + 1] - b->blk_start[li];
        const int ns = nb > bpc ? (nb + bpc - 1) / bpc : 1;
        for (int qt = 0; qt < nqt; qt++) {
            if (ns == 1) {
                wk[iw++] = (struct att_work){li, 0, nb, qt, -1};
                continue;
            }
            mg[im++] = (struct att_merge){li, qt, parts, ns};
            for (int j = 0; j < ns; j++) {
                const int b0 = j * bpc, cnt = nb - b0 < bpc ? nb - b0 : bpc;
                wk[iw++] = (struct att_work){li, b0, cnt, qt, parts++};
            }
        }
    }
    OKV_CU(cudaMemcpyAsync(ac->d_plan, h, bytes, cudaMemcpyHostToDevice, c->stream), "attention plan upload");
    OKV_CU(cudaEventRecord(ac->stage_ev, c->stream), "attention plan event");
    /* remember the inputs */
    enum okv_status st;
    ac->valid = false;
    if ((st = ensure_host(&ac->h_start, &ac->h_start_cap, (size_t)n_lists + 1)) != OKV_OK ||
        (st = ensure_host(&ac->h_unit, &ac->h_cap, (size_t)n_blocks)) != OKV_OK)
        return st;
    if ((st = ensure_host(&ac->h_index, &ac->h_index_cap, (size_t)n_blocks)) != OKV_OK)
        return st;
    memcpy(ac->h_start, b->blk_start, sizeof(int32_t) * (size_t)(n_lists + 1));
    memcpy(ac->h_unit, b->blk_unit, sizeof(int32_t) * (size_t)n_blocks);
    memcpy(ac->h_index, b->blk_index, sizeof(int32_t) * (size_t)n_blocks);
    int32_t max_unit = -1;
    for (int i = b->blk_start[0]; i < n_blocks; i++)
        if (!(b->blk_unit[i] & OKV_UNIT_STAGE) && b->blk_unit[i] > max_unit)
            max_unit = b->blk_unit[i];
    ac->max_unit = max_unit;
    ac->kv = kv;
    ac->gen = c->step.gen;
    ac->n_heads = n_heads;
    ac->n_lists = n_lists;
    ac->n_blocks = n_blocks;
    ac->n_work = n_work;
    ac->n_merge = n_merge;
    ac->n_parts = parts;
    ac->off_start = off_start;
    ac->off_unit = off_unit;
    ac->off_index = off_index;
    ac->off_work = off_work;
    ac->off_merge = off_merge;
    ac->valid = true;
    return OKV_OK;
}

extern "C" enum okv_status okv_cuda_attention(okv_backend *be, okv_bmem *out, const okv_bmem *q, const okv_bkv *kv, int layer,
                                              const struct okv_attn_blocks *blocks, int n_heads, float scale)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    const int n = c->meta.n_tokens, ns = c->meta.n_seqs, nkv = kv->g.n_kv_heads, hd = kv->g.head_dim;
    const size_t need = (size_t)n * n_heads * hd;
    if (out->n < need || q->n < need || n_heads <= 0 || n_heads % nkv != 0 || layer < 0 || layer >= kv->g.n_layers)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: bad shapes (%d rows, %d heads, layer %d)", n, n_heads, layer);
    if (n == 0)
        return OKV_OK;
    const int n_lists = ns * nkv;
    const int32_t *bst = blocks->blk_start;
    if (bst[0] < 0)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: negative block list start");
    for (int i = 0; i < n_lists; i++)
        if (bst[i + 1] < bst[i])
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: block list %d has negative length", i);
    const int n_blocks = bst[n_lists];
    enum okv_status st;
    /* lists equal to the last validated ones (dense layers of one step) skip the checks */
    if (!plan_matches(&c->attn, kv, c->step.gen, n_heads, n_lists, n_blocks, blocks)) {
        for (int i = bst[0]; i < n_blocks; i++)
            if (!okv_cuda_unit_valid(kv, layer, blocks->blk_unit[i]) || blocks->blk_index[i] < 0)
                return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: block %d: unit %d / index %d out of range", i,
                                     blocks->blk_unit[i], blocks->blk_index[i]);
        if ((st = build_plan(c, kv, blocks, n_heads, n_lists, n_blocks)) != OKV_OK) {
            c->attn.valid = false;
            return st;
        }
    } else if (kv->layer_units[layer] < (size_t)c->attn.max_unit + 1) {
        /* same lists, another layer with fewer units */
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: unit %d out of range in layer %d", c->attn.max_unit, layer);
    }
    const struct cuda_attn_cache *ac = &c->attn;
    struct att_args a;
    a.q = q->d;
    a.out = out->d;
    a.dev = kv->dev;
    a.layer_off = (long long)kv->layer_off[layer];
    a.stage_off = (long long)kv->total_units;
    a.blk_start = (const int32_t *)(ac->d_plan + ac->off_start);
    a.blk_unit = (const int32_t *)(ac->d_plan + ac->off_unit);
    a.blk_index = (const int32_t *)(ac->d_plan + ac->off_index);
    a.work = (const struct att_work *)(ac->d_plan + ac->off_work);
    a.merge = (const struct att_merge *)(ac->d_plan + ac->off_merge);
    a.seq_row_off = c->step.seq_row_off;
    a.seq_rows = c->step.seq_rows;
    a.tok_pos = c->step.tok_pos;
    a.seq_kv_len = c->step.seq_kv_len;
    a.part_acc = a.part_ml = NULL;
    if (ac->n_parts > 0) {
        float *p = NULL;
        if ((st = okv_cuda_scratch(c, (size_t)ac->n_parts * ATT_RQ * (hd + 2), &p)) != OKV_OK)
            return st;
        a.part_acc = p;
        a.part_ml = p + (size_t)ac->n_parts * ATT_RQ * hd;
    }
    a.n_heads = n_heads;
    a.nkv = nkv;
    a.group = n_heads / nkv;
    a.hd = hd;
    a.bs = kv->g.block_size;
    a.unit_elems = kv->unit_elems;
    a.scale = scale;
    if (ac->n_work == 0)
        return OKV_OK;
    const size_t smem = attn_smem_bytes(hd);
    if (smem > c->smem_optin)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda attention: head_dim %d needs %zu B of shared memory", hd, smem);
    static size_t smem_set[4];
    void (*kern)(const struct att_args);
    int ki;
    if (hd <= 32) {
        kern = attn_k<1>;
        ki = 0;
    } else if (hd <= 64) {
        kern = attn_k<2>;
        ki = 1;
    } else if (hd <= 128) {
        kern = attn_k<4>;
        ki = 2;
    } else {
        kern = attn_k<8>;
        ki = 3;
    }
    if (smem > smem_set[ki]) {
        OKV_CU(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "attention smem limit");
        OKV_CU(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, 100), "attention smem carveout");
        smem_set[ki] = smem;
    }
    kern<<<ac->n_work, ATT_W * 32, smem, c->stream>>>(a);
    OKV_LAUNCHED("attention kernel");
    if (ac->n_merge > 0) {
        attn_merge_k<<<ac->n_merge, 128, 0, c->stream>>>(a);
        OKV_LAUNCHED("attention merge kernel");
    }
    return OKV_OK;
}
