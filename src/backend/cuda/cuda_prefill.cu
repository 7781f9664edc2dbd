/* Attention for prefill-shaped calls: flash-attention-2 tiles of many query vectors.
 *
 * Same semantics as okv_cuda_attention (cuda_attention.cu): per list (sequence s, KV
 * head h) a set of KV blocks in any order (block b holds key positions
 * blk_index[b]*bs ...), the query vectors of the list are the (row of s, query head
 * of h's GQA group) pairs, and the vector of a row at position p reads the keys at
 * positions kp <= p with kp < seq_kv_len[s].
 *
 * attn2_k (flash decoding) serves 8 query vectors per work item, so a prefill chunk of
 * R rows re-reads its sequence's K/V R*group/8 times. Here a CTA (pf_attn_k) owns a
 * tile of BM = 16*NW consecutive query vectors of one list (64 with 4 warps, 128 with
 * 8) and walks the list's whole key range once; there is no split over keys (a
 * prefill chunk has R*group/BM tiles per list, enough CTAs to fill the GPU).
 *
 *  - Chunks of 64 keys are copied to shared memory (K and V rows padded to HD+8
 *    bf16, conflict-free ldmatrix) with cp.async, double-buffered: the copy of chunk
 *    j+1 is in flight while chunk j is computed. Warp w copies rows [w*64/NW, ...)
 *    of the chunk; lane i of it resolves the unit of row i (blk_unit, blk_index one
 *    chunk ahead, staging units through stage_off) and the warp shares the row
 *    offsets with shuffles. Keys at or past the tile's limit (max over its vectors
 *    of min(p+1, kv_len)) and keys past the list are zero-filled and never read from
 *    HBM; their positions go to shared memory for the masks.
 *  - Warp w owns vectors [16w, 16w+16) of the tile as the 16 rows of the mma A
 *    operand. Its query (fp32, scaled by scale*log2(e)) is converted to bf16 A
 *    fragments once, in registers. S = Q K^T and O += P V use
 *    mma.sync.m16n8k16 (bf16 in, fp32 accumulate), K fragments by ldmatrix, V by
 *    ldmatrix.trans. Online softmax in fp32, base 2 (running max and sum per row);
 *    P is rounded to bf16 for P V. A warp skips a chunk none of whose keys any of its
 *    vectors reads, and applies the per-element mask only to chunks holding a key
 *    that some of its vectors must not read.
 *  - Output: O / l in fp32 (0 for a vector that reads no key).
 *
 * Precision: Q and P are rounded to bf16 (relative 2^-9), K and V are bf16 already;
 * the decode kernel's hi/lo split is not used here (it would double the tensor work).
 *
 * On by default (OKV_PREFILL_KERNEL=0 turns it off; read when the context is created, see
 * cuda_internal.h) for head_dim 64 and 128: a call's sequences with rows * group >=
 * PF_MIN_VECS come here, the others of the same call go to the decode kernel. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_mma.cuh"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PF_KC 64          /* keys per chunk */
#define PF_MIN_VECS 64    /* prefill-shaped: max rows of a sequence * group reaches this */

struct pf_item { int list, tile; };

struct pf_args {
    const float *q;
    float *out;
    const okv_bf16 *dev;                 /* device tier base */
    long long layer_off, stage_off, unit_elems;
    const int32_t *blk_start, *blk_unit, *blk_index;
    const struct pf_item *items;         /* [gridDim.x] */
    const int32_t *seq_row_off, *seq_rows, *tok_pos, *seq_kv_len;
    int n_heads, nkv, group, bs;
    float scale_log2;                    /* scale * log2(e) */
};

template <int HD, int NW>
struct pf_cfg {
    static constexpr int BM = 16 * NW;          /* query vectors per tile */
    static constexpr int ROW = HD + 8;          /* padded shared-memory row, bf16 elements */
    static constexpr int RPW = PF_KC / NW;      /* chunk rows each warp copies */
    static constexpr int P = HD / 8;            /* 16-byte pieces per row */
    static constexpr int ITERS = RPW * P / 32;  /* copy steps per warp and chunk (K and V each) */
    static constexpr size_t STAGE = (size_t)2 * PF_KC * ROW * sizeof(okv_bf16);   /* K then V */
    static constexpr size_t SMEM = 2 * STAGE + (size_t)2 * PF_KC * sizeof(int);
    /* resident CTAs to fit the registers for: 12 warps of <= 168 registers with 4 warps
     * (no spills at head_dim 128; 128 registers for 16 warps spill at head_dim 64) */
    static constexpr int MINB = NW == 4 ? 3 : 1;
    static_assert(HD % 16 == 0 && PF_KC == 64 && PF_KC % NW == 0 && RPW <= 32 && (RPW * P) % 32 == 0, "shape");
};

/* (x0, x1) rounded to bf16, x0 in the low half (the lower column of a fragment) */
static __device__ __forceinline__ uint32_t pf_pack(float x0, float x1)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(x0, x1);
    return *(uint32_t *)&v;
}

/* Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16): lane = 4g + t. A (16 x 16,
 * row-major): a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same), a2 = (row g, cols
 * 2t+8, 2t+9), a3 = (row g+8, same). B (16 x 8): b0 = (rows 2t, 2t+1, col g), b1 =
 * (rows 2t+8, 2t+9, col g). C (16 x 8): c0, c1 = (row g, cols 2t, 2t+1), c2, c3 =
 * (row g+8, same). So the scores of row g are c0, c1 and those of row g+8 c2, c3, and
 * two adjacent 8-key tiles of C are the A fragment of a 16-key step of P V. */
template <int HD, int NW>
static __global__ void __launch_bounds__(NW * 32, pf_cfg<HD, NW>::MINB) pf_attn_k(const struct pf_args a)
{
    typedef pf_cfg<HD, NW> C;
    constexpr int KC = PF_KC, ROW = C::ROW, P = C::P, RPW = C::RPW, NT = KC / 8;
    extern __shared__ __align__(16) unsigned char smem[];
    okv_bf16 *skv = (okv_bf16 *)smem;                  /* [2 stages][K, V][KC][ROW] */
    int *skp = (int *)(smem + 2 * C::STAGE);           /* [2 stages][KC] key positions (INT_MAX: none) */
    __shared__ int s_lim;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const struct pf_item item = a.items[blockIdx.x];
    const int s = item.list / a.nkv, h = item.list % a.nkv;
    const int r0 = a.seq_row_off[s], nv = (a.seq_row_off[s + 1] - r0) * a.group;
    const int kv_len = a.seq_kv_len[s];
    const int bs = a.bs;
    const int base = a.blk_start[item.list];
    const int nkeys = (a.blk_start[item.list + 1] - base) * bs;
    const int nch = (nkeys + KC - 1) / KC;

    /* block of this warp's copy row `lane` of chunk ch, fetched one chunk ahead */
    int mu = 0, mi = -1, moff = 0;
    auto load_meta = [&](int ch) {
        mi = -1;
        const int kj = ch * KC + warp * RPW + lane;
        if (lane < RPW && ch < nch && kj < nkeys) {
            const int b = kj / bs;
            moff = kj - b * bs;
            mu = __ldg(a.blk_unit + base + b);
            mi = __ldg(a.blk_index + base + b);
        }
    };
    load_meta(0);   /* early: the latency overlaps the query loads */

    /* this thread's rows g (half 0) and g+8 (half 1) of the warp's 16 vectors */
    const int v0 = item.tile * C::BM + warp * 16 + g;
    uint32_t qa[HD / 16][4];
    int glim[2];     /* the vector reads keys kp < glim */
    bool vok[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int v = v0 + 8 * half;
        vok[half] = v < nv;
        glim[half] = 0;
        if (vok[half]) {
            const int row = a.seq_rows[r0 + v / a.group], qh = h * a.group + v % a.group;
            glim[half] = min(kv_len, a.tok_pos[row] + 1);
            const float *qp = a.q + ((size_t)row * a.n_heads + qh) * HD;
            const float sc = a.scale_log2;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                const float2 x0 = *(const float2 *)(qp + kk * 16 + 2 * t);
                const float2 x1 = *(const float2 *)(qp + kk * 16 + 2 * t + 8);
                qa[kk][half] = pf_pack(x0.x * sc, x0.y * sc);
                qa[kk][2 + half] = pf_pack(x1.x * sc, x1.y * sc);
            }
        } else {
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++)
                qa[kk][half] = qa[kk][2 + half] = 0u;
        }
    }
    /* warp limits: some vector reads keys below wmax, every vector reads those below wmin */
    int wmax = max(glim[0], glim[1]);
    int wmin = min(vok[0] ? glim[0] : INT_MAX, vok[1] ? glim[1] : INT_MAX);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
        wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
    }
    if (threadIdx.x == 0)
        s_lim = 0;
    __syncthreads();
    if (lane == 0)
        atomicMax(&s_lim, wmax);
    __syncthreads();
    const int lim = s_lim;   /* keys at or past lim are read by no vector of the tile */

    /* copy chunk ch into stage ch & 1 (the caller commits) */
    auto issue = [&](int ch) {
        okv_bf16 *kb = skv + (size_t)(ch & 1) * 2 * KC * ROW, *vb = kb + KC * ROW;
        int kp = INT_MAX;
        long long koff = 0;
        if (mi >= 0) {
            kp = mi * bs + moff;
            koff = okv_cuda_unit_global(mu, a.layer_off, a.stage_off) * a.unit_elems + (long long)moff * HD;
        }
        if (lane < RPW)
            skp[(ch & 1) * KC + warp * RPW + lane] = kp;
        const unsigned vm = __ballot_sync(0xffffffffu, kp < lim);
        load_meta(ch + 1);
#pragma unroll
        for (int it = 0; it < C::ITERS; it++) {
            const int i = it * 32 + lane, r = i / P, c = i % P;
            const long long ro = __shfl_sync(0xffffffffu, koff, r);
            const bool rv = (vm >> r) & 1u;
            const okv_bf16 *src = a.dev + (rv ? ro + c * 8 : 0);
            const int dr = warp * RPW + r;
            cp_async16(kb + dr * ROW + c * 8, src, rv ? 16 : 0);
            cp_async16(vb + dr * ROW + c * 8, rv ? src + (size_t)bs * HD : src, rv ? 16 : 0);
        }
    };

    float o[HD / 8][4];
#pragma unroll
    for (int n = 0; n < HD / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;   /* rows g, g+8; l partial over the quad */

    if (nch > 0)
        issue(0);
    cp_async_commit();
    for (int ch = 0; ch < nch; ch++) {
        if (ch + 1 < nch)
            issue(ch + 1);   /* its stage was released by the barrier that ended chunk ch-1 */
        cp_async_commit();
        cp_async_wait<1>();     /* this thread's copies of chunk ch have landed */
        __syncthreads();     /* everyone's */
        const okv_bf16 *kb = skv + (size_t)(ch & 1) * 2 * KC * ROW, *vb = kb + KC * ROW;
        const int *kpb = skp + (ch & 1) * KC;
        const int ka = kpb[lane], kc = kpb[lane + 32];
        if (__any_sync(0xffffffffu, ka < wmax || kc < wmax)) {
            const bool nomask = __all_sync(0xffffffffu, ka < wmin && kc < wmin);
            /* S = Q K^T: 8 key tiles of 8 */
            float sc[NT][4];
            mma_qk<HD, KC, ROW>(sc, qa, kb, lane);
            if (!nomask) {
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    const int2 kp2 = *(const int2 *)(kpb + n * 8 + 2 * t);
                    sc[n][0] = kp2.x < glim[0] ? sc[n][0] : -INFINITY;
                    sc[n][1] = kp2.y < glim[0] ? sc[n][1] : -INFINITY;
                    sc[n][2] = kp2.x < glim[1] ? sc[n][2] : -INFINITY;
                    sc[n][3] = kp2.y < glim[1] ? sc[n][3] : -INFINITY;
                }
            }
            /* online softmax, base 2; the quad 4g..4g+3 holds rows g and g+8 */
            float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                mx0 = fmaxf(mx0, fmaxf(sc[n][0], sc[n][1]));
                mx1 = fmaxf(mx1, fmaxf(sc[n][2], sc[n][3]));
            }
#pragma unroll
            for (int x = 1; x <= 2; x <<= 1) {
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
            }
            const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
            const float al0 = m0 == -INFINITY ? 0.f : ex2(m0 - mn0);
            const float al1 = m1 == -INFINITY ? 0.f : ex2(m1 - mn1);
            const float ms0 = mn0 == -INFINITY ? 0.f : mn0, ms1 = mn1 == -INFINITY ? 0.f : mn1;
            float ls0 = 0.f, ls1 = 0.f;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                sc[n][0] = ex2(sc[n][0] - ms0);
                sc[n][1] = ex2(sc[n][1] - ms0);
                sc[n][2] = ex2(sc[n][2] - ms1);
                sc[n][3] = ex2(sc[n][3] - ms1);
                ls0 += sc[n][0] + sc[n][1];
                ls1 += sc[n][2] + sc[n][3];
            }
            l0 = l0 * al0 + ls0;
            l1 = l1 * al1 + ls1;
            m0 = mn0;
            m1 = mn1;
#pragma unroll
            for (int n = 0; n < HD / 8; n++) {
                o[n][0] *= al0;
                o[n][1] *= al0;
                o[n][2] *= al1;
                o[n][3] *= al1;
            }
            /* O += P V: key steps of 16, dim tiles of 8 */
#pragma unroll
            for (int k16 = 0; k16 < KC / 16; k16++) {
                uint32_t pa[4];
                pa[0] = pf_pack(sc[2 * k16][0], sc[2 * k16][1]);
                pa[1] = pf_pack(sc[2 * k16][2], sc[2 * k16][3]);
                pa[2] = pf_pack(sc[2 * k16 + 1][0], sc[2 * k16 + 1][1]);
                pa[3] = pf_pack(sc[2 * k16 + 1][2], sc[2 * k16 + 1][3]);
                /* x4.trans: keys +0..7 dims +0..7, keys +8..15 dims +0..7, keys +0..7 dims +8..15, keys +8..15 dims +8..15 */
                const okv_bf16 *vr = vb + (k16 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * ROW + (lane >> 4) * 8;
#pragma unroll
                for (int dp = 0; dp < HD / 16; dp++) {
                    uint32_t b[4];
                    ldsm_x4_t(b, vr + dp * 16);
                    mma_bf16(o[2 * dp], pa, b[0], b[1]);
                    mma_bf16(o[2 * dp + 1], pa, b[2], b[3]);
                }
            }
        }
        __syncthreads();   /* stage ch & 1 is free for chunk ch+2 */
    }
    cp_async_wait<0>();

#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, x);
        l1 += __shfl_xor_sync(0xffffffffu, l1, x);
    }
#pragma unroll
    for (int half = 0; half < 2; half++) {
        if (!vok[half])
            continue;
        const int v = v0 + 8 * half;
        const int row = a.seq_rows[r0 + v / a.group], qh = h * a.group + v % a.group;
        const float l = half ? l1 : l0;
        const float il = l > 0.f ? 1.f / l : 0.f;
        float *op = a.out + ((size_t)row * a.n_heads + qh) * HD + 2 * t;
#pragma unroll
        for (int n = 0; n < HD / 8; n++)
            *(float2 *)(op + n * 8) = make_float2(o[n][2 * half] * il, o[n][2 * half + 1] * il);
    }
}

/* ---- host ---- */

typedef void (*pf_fn)(const struct pf_args);
struct pf_kern {
    pf_fn fn;
    int threads, bm;
    size_t smem;
};

template <int HD, int NW>
static void pf_info(struct pf_kern *k)
{
    k->fn = pf_attn_k<HD, NW>;
    k->threads = NW * 32;
    k->bm = pf_cfg<HD, NW>::BM;
    k->smem = pf_cfg<HD, NW>::SMEM;
}

/* mode: OKV_PREFILL_KERNEL (128: tiles of 128 vectors, else 64) */
static bool pf_pick(int hd, int mode, struct pf_kern *k)
{
    const bool big = mode == 128;
    switch (hd) {
    case 64: big ? pf_info<64, 8>(k) : pf_info<64, 4>(k); return true;
    case 128: big ? pf_info<128, 8>(k) : pf_info<128, 4>(k); return true;
    default: return false;
    }
}

extern "C" int okv_cuda_prefill_min_rows(const struct cuda_ctx *c, int head_dim, int group)
{
    struct pf_kern k;
    if (c->prefill_kernel == 0 || group <= 0 || !pf_pick(head_dim, c->prefill_kernel, &k) || k.smem > c->smem_optin)
        return INT_MAX;
    const int min_rows = (PF_MIN_VECS + group - 1) / group;
    return c->step.max_rows_per_seq >= min_rows ? min_rows : INT_MAX;
}

/* function attributes belong to the device: set once per kernel and context */
static enum okv_status pf_prepare(struct cuda_ctx *c, const struct pf_kern *k)
{
    const void *fn = (const void *)k->fn;
    for (int i = 0; i < c->pf_n_seen; i++)
        if (c->pf_seen[i] == fn)
            return OKV_OK;
    OKV_CU(cudaFuncSetAttribute(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k->smem), "prefill attention smem limit");
    OKV_CU(cudaFuncSetAttribute(k->fn, cudaFuncAttributePreferredSharedMemoryCarveout, 100), "prefill attention smem carveout");
    if (c->pf_n_seen < (int)(sizeof c->pf_seen / sizeof c->pf_seen[0]))
        c->pf_seen[c->pf_n_seen++] = fn;
    return OKV_OK;
}

struct pf_order { int nb, list; };

static int pf_order_cmp(const void *x, const void *y)
{
    const struct pf_order *a = (const struct pf_order *)x, *b = (const struct pf_order *)y;
    if (a->nb != b->nb)
        return a->nb > b->nb ? -1 : 1;
    return a->list < b->list ? -1 : a->list > b->list;
}

extern "C" enum okv_status okv_cuda_prefill_attention(struct cuda_ctx *c, const struct okv_cuda_prefill_call *p)
{
    const struct okv_bkv *kv = p->kv;
    const int nkv = kv->g.n_kv_heads, hd = kv->g.head_dim, group = p->n_heads / nkv, ns = c->step.n_seqs;
    const int n_lists = ns * nkv;
    struct pf_kern k;
    if (!pf_pick(hd, c->prefill_kernel, &k) || k.smem > c->smem_optin)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda prefill attention: head_dim %d not supported", hd);
    enum okv_status st;
    if ((st = pf_prepare(c, &k)) != OKV_OK)
        return st;
    /* CTAs: lists by decreasing length, a list's tiles last first (causal: the later
     * rows read more keys), so the longest items start first and the tiles of one
     * list run side by side (its K/V stay in L2) */
    const int32_t *roff = c->step.h_row_off;
    long long n_items = 0;
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv;
        if (roff[s + 1] - roff[s] >= p->min_rows)   /* the decode kernel takes the others */
            n_items += ((long long)(roff[s + 1] - roff[s]) * group + k.bm - 1) / k.bm;
    }
    if (n_items == 0)
        return OKV_OK;
    if (n_items > INT_MAX)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda prefill attention: %lld tiles", n_items);
    struct pf_order *ord = (struct pf_order *)okv_malloc(sizeof *ord * (size_t)n_lists, OKV_TAG_BACKEND);
    if (!ord)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda prefill attention: out of host memory");
    for (int li = 0; li < n_lists; li++)
        ord[li] = (struct pf_order){p->h_start[li + 1] - p->h_start[li], li};
    qsort(ord, (size_t)n_lists, sizeof *ord, pf_order_cmp);
    void *hp = NULL, *dp = NULL;
    const size_t bytes = sizeof(struct pf_item) * (size_t)n_items;
    if ((st = okv_cuda_ring_alloc(c, bytes, &hp, &dp)) != OKV_OK) {
        okv_free(ord);
        return st;
    }
    struct pf_item *items = (struct pf_item *)hp;
    int at = 0;
    for (int i = 0; i < n_lists; i++) {
        const int li = ord[i].list, s = li / nkv;
        if (roff[s + 1] - roff[s] < p->min_rows)
            continue;
        const int nt = (int)(((long long)(roff[s + 1] - roff[s]) * group + k.bm - 1) / k.bm);
        for (int tt = nt - 1; tt >= 0; tt--)
            items[at++] = (struct pf_item){li, tt};
    }
    okv_free(ord);
    OKV_CU(cudaMemcpyAsync(dp, hp, bytes, cudaMemcpyHostToDevice, c->stream), "prefill attention items upload");
    struct pf_args a;
    a.q = p->q;
    a.out = p->out;
    a.dev = kv->dev;
    a.layer_off = (long long)kv->layer_off[p->layer];
    a.stage_off = (long long)kv->total_units;
    a.unit_elems = (long long)kv->unit_elems;
    a.blk_start = p->d_start;
    a.blk_unit = p->d_unit;
    a.blk_index = p->d_index;
    a.items = (const struct pf_item *)dp;
    a.seq_row_off = c->step.seq_row_off;
    a.seq_rows = c->step.seq_rows;
    a.tok_pos = c->step.tok_pos;
    a.seq_kv_len = c->step.seq_kv_len;
    a.n_heads = p->n_heads;
    a.nkv = nkv;
    a.group = group;
    a.bs = kv->g.block_size;
    a.scale_log2 = p->scale * 1.4426950408889634f;
    k.fn<<<(unsigned)n_items, k.threads, k.smem, c->stream>>>(a);
    OKV_LAUNCHED("prefill attention kernel");
    return okv_cuda_ring_commit(c, c->stream);
}
