/* Attention over per-(sequence, KV head) block lists on the GPU: flash-decoding.
 *
 * Work item = (list (s, h), a range of its blocks, a tile of up to ATT_RQ query
 * vectors). The query vectors of a list are all (row of s, query head of h's GQA
 * group) pairs, so one pass over the K/V of the range serves the whole group and
 * every query row of the sequence (verify, prefill chunks): K/V are read from HBM
 * once per tile instead of once per query head.
 *
 * Two kernels compute an item:
 *  - attn2_k (head_dim 16, 32, 64, 96, 128): per-warp cp.async pipelines and
 *    mma.m16n8k16 tensor-core products (see its comment). A list split into several
 *    ranges is merged in place by the CTA that finishes last (a counter per list).
 *    The split policy (choose_bpc) sizes the items for the resident CTAs of the GPU.
 *    A chunk made of whole blocks (or of part of one) is copied by issue_seg, one base
 *    address a block; other block sizes take a shuffle and an address a 16-byte piece.
 *    Measured on the H200 (bench/cuda_attention, 32 q / 8 KV heads, hd 128; bench/RESULTS.md
 *    section 38): 8K context 3.8 TB/s at batch 16, 4.2 TB/s at 256; 32K 3.75 TB/s at 4,
 *    4.0 TB/s at 16; batch 1 at 8K 1.87 TB/s (18-19 us a layer, half of it fixed cost).
 *  - attn_k (other head sizes, or variant -1 of cuda_bench.h): 4 warps that each
 *    copy a 32-key chunk to shared memory (cp.async, zero fill), wait for it, then
 *    compute the scores with one lane per key and P.V with each lane owning
 *    head_dim/32 output dims; partial states of split lists are merged by
 *    attn_merge_k. About 1.4-2 TB/s.
 *
 * Masking: the query of a row at position p reads key positions kp <= p and
 * kp < seq_kv_len[s] (block b holds positions blk_index[b]*bs ...).
 *
 * The plan (block lists + work items + merge counters) is uploaded in one copy; when
 * a call's lists equal the previous call's in the same step (dense layers), it is
 * reused. */
#include "backend/cuda/cuda_bench.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_mma.cuh"

#include <limits.h>
#include <math.h>
#include <string.h>

#define ATT_W 4      /* warps per CTA */
#define ATT_RQ 8     /* query vectors per work item */

/* b0: the range's first block in the packed lists (blk_start[list] + its offset in the list,
 * resolved on the host: one dependent load fewer before a CTA's first copy) */
struct att_work { int list, b0, nb, qt, part, mrg; };
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
    int *cnt;          /* [merges] parts finished (tensor-core kernel; the last one merges and resets it) */
    int n_heads, nkv, group, hd, bs;
    int bs_shift;      /* log2(bs) where bs is a power of two (the engine's block sizes), else -1 */
    size_t unit_elems;
    float scale;
};

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
    okv_pdl_trigger();   /* the merge or the output projection follows */
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
    const int base = w.b0;
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

/* ---- tensor-core kernel (head_dim a multiple of 16, up to 128) ----
 *
 * Same work items and outputs as attn_k. A CTA is NW warps; warp w takes the KC-key
 * chunks w, w+NW, ... of the range through its own NST-stage cp.async pipeline (K
 * and V rows to padded shared memory, zero fill for keys past the tile's limit), so
 * NST-1 chunks are in flight while it computes one. Scores and P.V use
 * mma.m16n8k16 (bf16 in, fp32 accumulate) with the tile's 8 query vectors as the
 * 16 rows of A: row g holds vector g rounded to bf16 ("hi"), row g+8 the rounding
 * error ("lo"), so S = C[g] + C[g+8] is the product of the fp32 query with the bf16
 * keys to ~2^-17; the probabilities are split the same way for P.V. The thread that
 * holds row g of C also holds row g+8 (c0,c1 / c2,c3), so no shuffles are needed.
 * Softmax runs in base 2 (the query is pre-scaled by scale*log2(e)). */

template <int NW, int HD, int KC, int NST>
struct att2_cfg {
    static constexpr int ROW = HD + 8;                         /* padded row, bf16 elements */
    static constexpr int STAGE = 2 * KC * ROW;                 /* K then V */
    static constexpr size_t SMEM = (size_t)NW * NST * ((size_t)STAGE * 2 + (size_t)KC * 4);
    static_assert(HD % 16 == 0 && KC % 16 == 0 && NST >= 2, "shape");
    static_assert((size_t)NW * NST * STAGE * 2 >= (size_t)NW * ATT_RQ * HD * 4 + (size_t)NW * ATT_RQ * 2 * 4, "merge space");
};

/* x = hi + lo with hi, lo bf16: packs (x0, x1) into hi and lo pairs */
static __device__ __forceinline__ void split_bf2(float x0, float x1, uint32_t *hi, uint32_t *lo)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const float2 hf = __bfloat1622float2(h);
    __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
    *hi = *(uint32_t *)&h;
    *lo = *(uint32_t *)&l;
}


/* key kj of a block list -> (block, offset in it): a shift for power-of-two block sizes */
static __device__ __forceinline__ int blk_of(const struct att_args &a, int kj)
{
    return a.bs_shift >= 0 ? kj >> a.bs_shift : kj / a.bs;
}

/* The copies of one chunk's K and V rows into shared memory when its KC keys are segments of
 * SEG consecutive rows of one block each (SEG = KC: a block of at least KC keys; SEG = bs: whole
 * blocks): a lane copies the 16 bytes at column c of rows h, h + RPI, ... (RPI rows an
 * instruction, coalesced), from its segment's base (koff of the segment's first key, shuffled
 * from its lane once a segment) at offsets known at compile time, so each row costs its two
 * cp.async and a size select. Rows that vm masks are zero-filled (nothing is read; the address
 * stays inside the pool). */
template <int HD, int KC, int ROW, int SEG>
static __device__ __forceinline__ void issue_seg(const struct att_args &a, okv_bf16 *kb, long long koff, unsigned vm, int lane)
{
    constexpr int P = HD / 8, RPI = 32 / P, NS = KC / SEG;
    static_assert(SEG % RPI == 0 && KC % SEG == 0, "segment shape");
    const int h = lane / P, c = lane % P;
    const okv_bf16 *lb[NS];
#pragma unroll
    for (int q = 0; q < NS; q++)
        lb[q] = a.dev + __shfl_sync(0xffffffffu, koff, q * SEG) + (h * HD + c * 8);
    const size_t vstep = (size_t)a.bs * HD;
    okv_bf16 *kd = kb + h * ROW + c * 8;
    vm >>= h;
#pragma unroll
    for (int it = 0; it < KC / RPI; it++) {
        const int r0 = it * RPI;
        const okv_bf16 *src = lb[r0 / SEG] + (r0 % SEG) * HD;
        const int sz = (vm >> r0) & 1u ? 16 : 0;
        cp_async16(kd + r0 * ROW, src, sz);
        cp_async16(kd + KC * ROW + r0 * ROW, src + vstep, sz);
    }
}

template <int NW, int HD, int KC, int NST>
static __global__ void __launch_bounds__(NW * 32) attn2_k(const struct att_args a)
{
    okv_pdl_trigger();   /* the merge or the output projection follows */
    typedef att2_cfg<NW, HD, KC, NST> C;
    constexpr int ROW = C::ROW, P = HD / 8, NT = KC / 8;
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    okv_bf16 *wbuf = (okv_bf16 *)smem + (size_t)warp * NST * C::STAGE;
    int *wkp = (int *)((okv_bf16 *)smem + (size_t)NW * NST * C::STAGE) + warp * NST * KC;

    const struct att_work w = a.work[blockIdx.x];
    const int s = w.list / a.nkv, h = w.list % a.nkv;
    const int r0 = a.seq_row_off[s], nq = a.seq_row_off[s + 1] - r0;
    const int nr = min(ATT_RQ, nq * a.group - w.qt * ATT_RQ);
    const int kv_len = a.seq_kv_len[s];
    const int bs = a.bs;

    const int base = w.b0;
    const int nkeys = w.nb * bs;
    const int nch = (nkeys + KC - 1) / KC;
    const int my_n = nch > warp ? (nch - warp + NW - 1) / NW : 0;

    /* block metadata of the next chunk to issue (lane = key), loaded one issue ahead */
    int mu = 0, mi = -1;
    auto load_meta = [&](int j) {
        const int kj = (warp + j * NW) * KC + lane;
        mi = -1;
        if (lane < KC && j < my_n && kj < nkeys) {
            const int b = blk_of(a, kj);
            mu = a.blk_unit[base + b];
            mi = a.blk_index[base + b];
        }
    };
    load_meta(0);   /* early: its latency overlaps the query loads */

    /* query vector g of the tile: A fragments (hi rows g, lo rows g+8) and its key limit */
    uint32_t qa[HD / 16][4];
    int glim = 0;
    if (g < nr) {
        int row, qh;
        vec_of(a, r0, h, w.qt, g, &row, &qh);
        glim = min(kv_len, a.tok_pos[row] + 1);
        const float *qp = a.q + ((size_t)row * a.n_heads + qh) * HD;
        const float sc = a.scale * 1.4426950408889634f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const float2 x0 = *(const float2 *)(qp + kk * 16 + 2 * t);
            const float2 x1 = *(const float2 *)(qp + kk * 16 + 2 * t + 8);
            split_bf2(x0.x * sc, x0.y * sc, &qa[kk][0], &qa[kk][1]);
            split_bf2(x1.x * sc, x1.y * sc, &qa[kk][2], &qa[kk][3]);
        }
    } else {
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            qa[kk][0] = qa[kk][1] = qa[kk][2] = qa[kk][3] = 0u;
    }
    int lim = glim;   /* keys at or past lim are masked for every vector of the tile */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        lim = max(lim, __shfl_xor_sync(0xffffffffu, lim, o));

    auto issue = [&](int j) {
        if (j < my_n) {
            const int buf = j % NST;
            okv_bf16 *kb = wbuf + buf * C::STAGE, *vb = kb + KC * ROW;
            const int kj = (warp + j * NW) * KC + lane;
            int kp = 0x7fffffff;
            long long koff = 0;
            if (mi >= 0) {
                const int off = kj - blk_of(a, kj) * bs;
                kp = mi * bs + off;
                koff = okv_cuda_unit_global(mu, a.layer_off, a.stage_off) * (long long)a.unit_elems + (long long)off * HD;
            }
            if (lane < KC)
                wkp[buf * KC + lane] = kp;
            const unsigned vm = __ballot_sync(0xffffffffu, kp < lim);
            load_meta(j + 1);
            /* the chunk starts on a block boundary (items do, chunks are KC keys): its rows are
             * segments of min(bs, KC) consecutive rows when that is a power of two */
            constexpr bool SEGS = 32 % P == 0 && KC % 16 == 0 && 16 % (32 / P) == 0;   /* rows whole per instruction */
            if (SEGS && bs >= KC && (bs & (KC - 1)) == 0) {
                issue_seg<HD, KC, ROW, SEGS ? KC : 32 / P>(a, kb, koff, vm, lane);
            } else if (SEGS && bs == 16) {
                issue_seg<HD, KC, ROW, SEGS ? 16 : 32 / P>(a, kb, koff, vm, lane);
            } else
#pragma unroll
            for (int it = 0; it < KC * P / 32; it++) {
                const int i = it * 32 + lane, r = i / P, c = i % P;
                const long long ro = __shfl_sync(0xffffffffu, koff, r);
                const bool rv = (vm >> r) & 1u;
                const okv_bf16 *src = a.dev + (rv ? ro + c * 8 : 0);
                cp_async16(kb + r * ROW + c * 8, src, rv ? 16 : 0);
                cp_async16(vb + r * ROW + c * 8, rv ? src + (size_t)bs * HD : src, rv ? 16 : 0);
            }
        }
        cp_async_commit();
    };

    float o[HD / 8][4];
#pragma unroll
    for (int n = 0; n < HD / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m = -INFINITY, l = 0.f;

#pragma unroll
    for (int j = 0; j < NST - 1; j++)
        issue(j);

    for (int j = 0; j < my_n; j++) {
        cp_async_wait<NST - 2>();
        __syncwarp();
        issue(j + NST - 1);
        const int buf = j % NST;
        const okv_bf16 *kb = wbuf + buf * C::STAGE, *vb = kb + KC * ROW;
        const int *kpb = wkp + buf * KC;
        if (!__any_sync(0xffffffffu, kpb[lane % KC] < lim))
            continue;
        /* S = Q K^T: key n-tiles of 8 */
        float sacc[NT][4];
        mma_qk<HD, KC, ROW>(sacc, qa, kb, lane);
        /* online softmax over this chunk (row g; the quad of lanes 4g..4g+3 holds it) */
        float sv[NT][2];
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const int2 kp2 = *(const int2 *)(kpb + n * 8 + 2 * t);
            sv[n][0] = kp2.x < glim ? sacc[n][0] + sacc[n][2] : -INFINITY;
            sv[n][1] = kp2.y < glim ? sacc[n][1] + sacc[n][3] : -INFINITY;
            mx = fmaxf(mx, fmaxf(sv[n][0], sv[n][1]));
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = fmaxf(m, mx);
        const float alpha = m == -INFINITY ? 0.f : ex2(m - mn);
        const float msub = mn == -INFINITY ? 0.f : mn;
        float ls = 0.f;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            sv[n][0] = ex2(sv[n][0] - msub);
            sv[n][1] = ex2(sv[n][1] - msub);
            ls += sv[n][0] + sv[n][1];
        }
        l = l * alpha + ls;
        m = mn;
#pragma unroll
        for (int n = 0; n < HD / 8; n++) {
            o[n][0] *= alpha;
            o[n][1] *= alpha;
            o[n][2] *= alpha;
            o[n][3] *= alpha;
        }
        /* O += P V: key steps of 16, dim n-tiles of 8 */
#pragma unroll
        for (int k16 = 0; k16 < KC / 16; k16++) {
            uint32_t pa[4];
            split_bf2(sv[2 * k16][0], sv[2 * k16][1], &pa[0], &pa[1]);
            split_bf2(sv[2 * k16 + 1][0], sv[2 * k16 + 1][1], &pa[2], &pa[3]);
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
    cp_async_wait<0>();

    /* merge the warps: row g of warp w -> shared, then the CTA combines */
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    __syncthreads();
    float *macc = (float *)smem;                     /* [NW][RQ][HD] */
    float *sml = macc + (size_t)NW * ATT_RQ * HD;    /* [NW][RQ][2] */
#pragma unroll
    for (int n = 0; n < HD / 8; n++)
        *(float2 *)(macc + ((size_t)warp * ATT_RQ + g) * HD + n * 8 + 2 * t) = make_float2(o[n][0] + o[n][2], o[n][1] + o[n][3]);
    if (t == 0) {
        sml[(warp * ATT_RQ + g) * 2] = m;
        sml[(warp * ATT_RQ + g) * 2 + 1] = l;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nr * HD; i += NW * 32) {
        const int r = i / HD, d = i % HD;
        float M = -INFINITY;
#pragma unroll
        for (int ww = 0; ww < NW; ww++)
            M = fmaxf(M, sml[(ww * ATT_RQ + r) * 2]);
        float A = 0.f, L = 0.f;
        if (M != -INFINITY) {
#pragma unroll
            for (int ww = 0; ww < NW; ww++) {
                const float mw = sml[(ww * ATT_RQ + r) * 2];
                const float e = mw == -INFINITY ? 0.f : ex2(mw - M);
                L += e * sml[(ww * ATT_RQ + r) * 2 + 1];
                A += e * macc[((size_t)ww * ATT_RQ + r) * HD + d];
            }
        }
        if (w.part < 0) {
            int row, qh;
            vec_of(a, r0, h, w.qt, r, &row, &qh);
            a.out[((size_t)row * a.n_heads + qh) * HD + d] = L > 0.f ? A / L : 0.f;
        } else {
            a.part_acc[((size_t)w.part * ATT_RQ + r) * HD + d] = A;
            if (d == 0) {   /* base 2, merged below */
                a.part_ml[((size_t)w.part * ATT_RQ + r) * 2] = M;
                a.part_ml[((size_t)w.part * ATT_RQ + r) * 2 + 1] = L;
            }
        }
    }
    if (w.part < 0)
        return;

    /* A range of a split list: the CTA that finishes last merges the parts (log-sum-exp)
     * and resets the counter for the next launch. Parts are read with ld.cg: other
     * CTAs wrote them, and L1 is not coherent. */
    __shared__ int s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        s_last = atomicAdd(a.cnt + w.mrg, 1) == a.merge[w.mrg].count - 1;
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    const int first = a.merge[w.mrg].first, count = a.merge[w.mrg].count;
    for (int r = warp; r < nr; r += NW) {   /* per vector: max and sum over the parts */
        float mx = -INFINITY;
        for (int j = lane; j < count; j += 32)
            mx = fmaxf(mx, __ldcg(a.part_ml + ((size_t)(first + j) * ATT_RQ + r) * 2));
#pragma unroll
        for (int o2 = 16; o2 > 0; o2 >>= 1)
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o2));
        float L = 0.f;
        if (mx != -INFINITY)
            for (int j = lane; j < count; j += 32) {
                const float2 ml = __ldcg((const float2 *)(a.part_ml + ((size_t)(first + j) * ATT_RQ + r) * 2));
                L += ml.x == -INFINITY ? 0.f : ex2(ml.x - mx) * ml.y;
            }
        L = warp_sum(L);
        if (lane == 0) {
            sml[r * 2] = mx;
            sml[r * 2 + 1] = L;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nr * (HD / 4); i += NW * 32) {
        const int r = i / (HD / 4), d = (i % (HD / 4)) * 4;
        const float M = sml[r * 2], L = sml[r * 2 + 1];
        float4 A = make_float4(0.f, 0.f, 0.f, 0.f);
        if (M != -INFINITY) {
#pragma unroll 8
            for (int j = 0; j < count; j++) {
                const size_t pr = (size_t)(first + j) * ATT_RQ + r;
                const float mj = __ldcg(a.part_ml + pr * 2);
                const float4 v = __ldcg((const float4 *)(a.part_acc + pr * HD + d));
                const float e = mj == -INFINITY ? 0.f : ex2(mj - M);
                A.x += e * v.x;
                A.y += e * v.y;
                A.z += e * v.z;
                A.w += e * v.w;
            }
        }
        const float il = L > 0.f ? 1.f / L : 0.f;
        int row, qh;
        vec_of(a, r0, h, w.qt, r, &row, &qh);
        *(float4 *)(a.out + ((size_t)row * a.n_heads + qh) * HD + d) = make_float4(A.x * il, A.y * il, A.z * il, A.w * il);
    }
    if (threadIdx.x == 0)
        a.cnt[w.mrg] = 0;
}

/* log-sum-exp merge of the partial states of lists split into ranges */
static __global__ void attn_merge_k(const struct att_args a)
{
    okv_pdl_trigger();   /* the output projection follows */
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
    memset(ac, 0, sizeof *ac);
}

static bool plan_matches(const struct cuda_attn_cache *ac, const okv_bkv *kv, uint64_t gen, int n_heads, int n_lists,
                         int n_blocks, const struct okv_attn_blocks *b, int slots, int pf_min_rows)
{
    return ac->valid && ac->kv == kv && ac->slots == slots && ac->pf_min_rows == pf_min_rows && ac->gen == gen && ac->n_heads == n_heads && ac->n_lists == n_lists && ac->n_blocks == n_blocks &&
           ((b->version && b->version == ac->version) ||   /* the caller vouches for them */
            (!memcmp(ac->h_start, b->blk_start, sizeof(int32_t) * (size_t)(n_lists + 1)) &&
           !memcmp(ac->h_unit, b->blk_unit, sizeof(int32_t) * (size_t)n_blocks) &&
            !memcmp(ac->h_index, b->blk_index, sizeof(int32_t) * (size_t)n_blocks)));
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
/* Blocks per work item for `slots` resident CTAs: among split counts of the longest
 * list, the one with the least estimated time, max(waves * mean item, largest item),
 * an item costing its keys plus ATT_ITEM_OVH (start-up latency, partial state and
 * merge). Stops once the items fill 4 waves: more splitting only adds overhead. */
#define ATT_ITEM_OVH 64
#define ATT_ITEM_MIN 128
static int choose_bpc(const struct okv_attn_blocks *b, const int32_t *roff, int n_lists, int nkv, int group, int bs,
                      long long slots, int pf_min_rows)
{
    int maxnb = 0;
    for (int li = 0; li < n_lists; li++)
        if (roff[li / nkv + 1] - roff[li / nkv] < pf_min_rows)
            maxnb = b->blk_start[li + 1] - b->blk_start[li] > maxnb ? b->blk_start[li + 1] - b->blk_start[li] : maxnb;
    if (maxnb <= 1)
        return 1;
    const int min_b = (ATT_ITEM_MIN + bs - 1) / bs;
    double best = 1e300;
    int best_bpc = maxnb, prev = -1;
    for (int sp = 1; sp <= maxnb; sp++) {
        int bpc = (maxnb + sp - 1) / sp;
        if (bpc < min_b)
            bpc = min_b;
        if (bpc == prev)
            break;   /* only at min_b */
        prev = bpc;
        long long nw = 0;
        double cost = 0;
        for (int li = 0; li < n_lists; li++) {
            const int s = li / nkv, nq = roff[s + 1] - roff[s];
            if (nq >= pf_min_rows)
                continue;
            const int nqt = (nq * group + ATT_RQ - 1) / ATT_RQ;
            const int nb = b->blk_start[li + 1] - b->blk_start[li];
            const int ns = nb > bpc ? (nb + bpc - 1) / bpc : 1;
            nw += (long long)ns * nqt;
            cost += (double)nqt * ((double)nb * bs + (double)ns * ATT_ITEM_OVH);
        }
        const int ns_max = (maxnb + bpc - 1) / bpc;
        const double maxc = (double)((maxnb + ns_max - 1) / ns_max) * bs + ATT_ITEM_OVH;
        if (nw == 0)
            break;
        const double waves = (double)((nw + slots - 1) / slots);
        double est = waves * cost / (double)nw;
        if (est < maxc)
            est = maxc;
        if (est < best * 0.999) {
            best = est;
            best_bpc = bpc;
        }
        if (bpc <= min_b || nw >= 4 * slots)
            break;
    }
    return best_bpc;
}

/* Build and upload the plan for these lists. slots > 0: the tensor-core kernel's
 * policy for that many resident CTAs (lists split evenly); slots == 0: the SIMT
 * kernel's (about 4 items per SM, at least 256 keys each). kpi > 0 forces the keys
 * per item (tests). */
static enum okv_status build_plan(struct cuda_ctx *c, const okv_bkv *kv, const struct okv_attn_blocks *b, int n_heads,
                                  int n_lists, int n_blocks, int slots, int kpi, int pf_min_rows)
{
    struct cuda_attn_cache *ac = &c->attn;
    const int nkv = kv->g.n_kv_heads, group = n_heads / nkv, bs = kv->g.block_size;
    const int32_t *roff = c->step.h_row_off;
    int bpc;
    if (kpi > 0) {
        bpc = (kpi + bs - 1) / bs;
    } else if (slots > 0) {
        bpc = choose_bpc(b, roff, n_lists, nkv, group, bs, slots, pf_min_rows);
    } else {
        long long total_keys = 0;
        for (int li = 0; li < n_lists; li++) {
            const int s = li / nkv, nq = roff[s + 1] - roff[s];
            if (nq >= pf_min_rows)
                continue;
            const int nqt = (nq * group + ATT_RQ - 1) / ATT_RQ;
            total_keys += (long long)(b->blk_start[li + 1] - b->blk_start[li]) * bs * nqt;
        }
        const long long target = (long long)c->n_sms * 4;
        long long kpc = (total_keys + target - 1) / target;
        if (kpc < 256)
            kpc = 256;
        bpc = (int)((kpc + bs - 1) / bs);
    }
    const bool even = slots > 0;
    int n_work = 0, n_merge = 0;
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv, nq = roff[s + 1] - roff[s];
        if (nq >= pf_min_rows)   /* the prefill kernel's */
            continue;
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
    const size_t off_cnt = off_merge + (((size_t)n_merge * sizeof(struct att_merge) + 15) & ~(size_t)15);
    const size_t bytes = off_cnt + (size_t)n_merge * sizeof(int) + 16;
    /* staged through the ring, which holds several plans in flight (a step rebuilds one per
     * layer when the lists change layer by layer): the host need not wait for the last
     * plan's copy, and may run a step ahead of the device (overlapped decoding) */
    enum okv_status st = okv_cuda_ring_reserve(c, 4 * bytes);
    if (st != OKV_OK)
        return st;
    void *hv = NULL, *dv = NULL;
    if ((st = okv_cuda_ring_alloc(c, bytes, &hv, &dv)) != OKV_OK)
        return st;
    if (bytes > ac->d_cap) {
        OKV_CU(cudaStreamSynchronize(c->stream), "attention plan grow");
        if (ac->d_plan)
            cudaFree(ac->d_plan);
        ac->d_plan = NULL;
        ac->d_cap = 0;
        OKV_CU(cudaMalloc((void **)&ac->d_plan, bytes + bytes / 2), "attention plan (device)");
        ac->d_cap = bytes + bytes / 2;
    }
    char *h = (char *)hv;
    memcpy(h + off_start, b->blk_start, sizeof(int32_t) * (size_t)(n_lists + 1));
    memcpy(h + off_unit, b->blk_unit, sizeof(int32_t) * (size_t)n_blocks);
    memcpy(h + off_index, b->blk_index, sizeof(int32_t) * (size_t)n_blocks);
    struct att_work *wk = (struct att_work *)(h + off_work);
    struct att_merge *mg = (struct att_merge *)(h + off_merge);
    memset(h + off_cnt, 0, (size_t)n_merge * sizeof(int));   /* merge counters start at 0 */
    int iw = 0, im = 0, parts = 0;
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv, nq = roff[s + 1] - roff[s];
        if (nq >= pf_min_rows)
            continue;
        const int nqt = (nq * group + ATT_RQ - 1) / ATT_RQ;
        const int nb = b->blk_start[li + 1] - b->blk_start[li];
        const int ns = nb > bpc ? (nb + bpc - 1) / bpc : 1;
        for (int qt = 0; qt < nqt; qt++) {
            if (ns == 1) {
                wk[iw++] = (struct att_work){li, b->blk_start[li], nb, qt, -1, -1};
                continue;
            }
            mg[im] = (struct att_merge){li, qt, parts, ns};
            for (int j = 0; j < ns; j++) {
                int b0, cnt;
                if (even) {   /* ns near-equal pieces */
                    b0 = (int)((long long)j * nb / ns);
                    cnt = (int)((long long)(j + 1) * nb / ns) - b0;
                } else {
                    b0 = j * bpc;
                    cnt = nb - b0 < bpc ? nb - b0 : bpc;
                }
                wk[iw++] = (struct att_work){li, b->blk_start[li] + b0, cnt, qt, parts++, im};
            }
            im++;
        }
    }
    OKV_CU(cudaMemcpyAsync(ac->d_plan, h, bytes, cudaMemcpyHostToDevice, c->stream), "attention plan upload");
    if ((st = okv_cuda_ring_commit(c, c->stream)) != OKV_OK)
        return st;
    /* remember the inputs */
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
    ac->version = b->version;
    ac->n_heads = n_heads;
    ac->n_lists = n_lists;
    ac->n_blocks = n_blocks;
    ac->n_work = n_work;
    ac->n_merge = n_merge;
    ac->n_parts = parts;
    ac->slots = slots;
    ac->pf_min_rows = pf_min_rows;
    ac->off_start = off_start;
    ac->off_unit = off_unit;
    ac->off_index = off_index;
    ac->off_work = off_work;
    ac->off_merge = off_merge;
    ac->off_cnt = off_cnt;
    ac->valid = true;
    return OKV_OK;
}

/* ---- kernel choice ---- */

typedef void (*attn_fn)(const struct att_args);
struct attn_kern {
    attn_fn fn;
    int threads;
    size_t smem;
    bool tc;          /* tensor-core kernel (its plan policy) */
};

template <int NW, int HD, int KC, int NST>
static void attn2_info(struct attn_kern *k)
{
    k->fn = attn2_k<NW, HD, KC, NST>;
    k->threads = NW * 32;
    k->smem = att2_cfg<NW, HD, KC, NST>::SMEM;
    k->tc = true;
}

/* variant: 0 default, -1 the SIMT kernel, k > 0 a tuning variant (head_dim 128 only) */
static void attn_pick(int hd, int variant, struct attn_kern *k)
{
    if (variant >= 0) {
        switch (hd) {
        case 16: attn2_info<4, 16, 32, 3>(k); return;
        case 32: attn2_info<4, 32, 32, 3>(k); return;
        case 64: attn2_info<4, 64, 32, 3>(k); return;
        case 96: attn2_info<4, 96, 32, 3>(k); return;
        case 128:
            switch (variant) {
            case 1: attn2_info<4, 128, 16, 3>(k); return;
            case 2: attn2_info<4, 128, 16, 4>(k); return;
            case 4: attn2_info<4, 128, 16, 2>(k); return;
            case 5: attn2_info<8, 128, 16, 3>(k); return;
            case 6: attn2_info<2, 128, 16, 4>(k); return;
            default: attn2_info<4, 128, 32, 3>(k); return;
            }
        default: break;
        }
    }
    k->threads = ATT_W * 32;
    k->smem = attn_smem_bytes(hd);
    k->tc = false;
    if (hd <= 32)
        k->fn = attn_k<1>;
    else if (hd <= 64)
        k->fn = attn_k<2>;
    else if (hd <= 128)
        k->fn = attn_k<4>;
    else
        k->fn = attn_k<8>;
}

/* raise the kernel's shared-memory limit once; its resident CTAs per SM */
/* Raise the kernel's shared memory limit and find its occupancy, once per kernel and
 * context: function attributes belong to the current device, and each context is one
 * device driven by one thread. */
static enum okv_status attn_prepare(struct cuda_ctx *c, const struct attn_kern *k, int *occ)
{
    const void *fn = (const void *)k->fn;
    for (int i = 0; i < c->attn_n_seen; i++)
        if (c->attn_seen[i].fn == fn && c->attn_seen[i].smem >= k->smem) {
            *occ = c->attn_seen[i].occ;
            return OKV_OK;
        }
    OKV_CU(cudaFuncSetAttribute(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k->smem), "attention smem limit");
    OKV_CU(cudaFuncSetAttribute(k->fn, cudaFuncAttributePreferredSharedMemoryCarveout, 100), "attention smem carveout");
    int o = 0;
    OKV_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, k->fn, k->threads, k->smem), "attention occupancy");
    if (o < 1)
        o = 1;
    *occ = o;
    int i = 0;
    while (i < c->attn_n_seen && c->attn_seen[i].fn != fn)
        i++;
    if (i < 32) {
        c->attn_seen[i].fn = fn;
        c->attn_seen[i].smem = k->smem;
        c->attn_seen[i].occ = o;
        if (i == c->attn_n_seen)
            c->attn_n_seen++;
    }
    return OKV_OK;
}

extern "C" void okv_cuda_set_attn(okv_backend *be, int variant, int keys_per_item)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    c->attn_variant = variant;
    c->attn_kpi = keys_per_item;
    c->attn.valid = false;
}

extern "C" int okv_cuda_attn_info(const okv_backend *be, int *n_work, int *n_merge)
{
    const struct cuda_ctx *c = OKV_CUDA_CTX(be);
    if (n_work)
        *n_work = c->attn.n_work;
    if (n_merge)
        *n_merge = c->attn.n_merge;
    return c->attn.slots;
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
    struct attn_kern kern;
    attn_pick(hd, c->attn_variant, &kern);
    if (kern.smem > c->smem_optin)   /* a device with less shared memory: the SIMT kernel */
        attn_pick(hd, -1, &kern);
    if (kern.smem > c->smem_optin)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda attention: head_dim %d needs %zu B of shared memory", hd, kern.smem);
    int occ = 1;
    if ((st = attn_prepare(c, &kern, &occ)) != OKV_OK)
        return st;
    const int slots = kern.tc ? c->n_sms * occ : 0;
    /* sequences with this many rows or more go to the prefill kernel (INT_MAX: none) */
    const int pf_min_rows = okv_cuda_prefill_min_rows(c, hd, n_heads / nkv);
    /* lists equal to the last validated ones (dense layers of one step) skip the checks */
    if (!plan_matches(&c->attn, kv, c->step.gen, n_heads, n_lists, n_blocks, blocks, slots, pf_min_rows)) {
        for (int i = bst[0]; i < n_blocks; i++)
            if (!okv_cuda_unit_valid(kv, layer, blocks->blk_unit[i]) || blocks->blk_index[i] < 0)
                return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: block %d: unit %d / index %d out of range", i,
                                     blocks->blk_unit[i], blocks->blk_index[i]);
        if ((st = build_plan(c, kv, blocks, n_heads, n_lists, n_blocks, slots, c->attn_kpi, pf_min_rows)) != OKV_OK) {
            c->attn.valid = false;
            return st;
        }
    } else if (kv->layer_units[layer] < (size_t)c->attn.max_unit + 1) {
        /* same lists, another layer with fewer units */
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda attention: unit %d out of range in layer %d", c->attn.max_unit, layer);
    }
    const struct cuda_attn_cache *ac = &c->attn;
    /* device-side residency: the selected blocks replace the lists' placeholders */
    if (blocks->sel_fill &&
        (st = okv_cuda_resid_fill(c, kv, layer, blocks, n_lists, (int32_t *)(ac->d_plan + ac->off_unit),
                                  (int32_t *)(ac->d_plan + ac->off_index))) != OKV_OK)
        return st;
    if (pf_min_rows < INT_MAX) {   /* prefill-shaped sequences: tiles of many vectors (cuda_prefill.cu) */
        const struct okv_cuda_prefill_call pc = {out->d, q->d, kv, layer, (const int32_t *)(ac->d_plan + ac->off_start),
                                                 (const int32_t *)(ac->d_plan + ac->off_unit),
                                                 (const int32_t *)(ac->d_plan + ac->off_index), bst, n_heads, scale,
                                                 pf_min_rows};
        if ((st = okv_cuda_prefill_attention(c, &pc)) != OKV_OK)
            return st;
    }
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
    a.cnt = (int *)(ac->d_plan + ac->off_cnt);
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
    a.bs_shift = -1;
    for (int sh = 0; sh < 30; sh++)
        if (a.bs == 1 << sh)
            a.bs_shift = sh;
    a.unit_elems = kv->unit_elems;
    a.scale = scale;
    if (ac->n_work > 0) {   /* the decode-shaped sequences (all of them without the prefill kernel) */
        kern.fn<<<ac->n_work, kern.threads, kern.smem, c->stream>>>(a);
        OKV_LAUNCHED("attention kernel");
        if (ac->n_merge > 0 && !kern.tc) {   /* the tensor-core kernel merges in place */
            attn_merge_k<<<ac->n_merge, 128, 0, c->stream>>>(a);
            OKV_LAUNCHED("attention merge kernel");
        }
    }
    /* fetches into this layer's units wait for this point (see kv_fetch) */
    OKV_CU(cudaEventRecord(kv->attn_ev[layer], c->stream), "attention event");
    kv->attn_rec[layer] = true;
    return OKV_OK;
}
