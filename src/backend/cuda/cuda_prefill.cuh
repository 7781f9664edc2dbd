/* Shared by the prefill attention kernels: cuda_prefill.cu (mma.sync, the tiles, split keys,
 * the merge, the host side) and cuda_prefill_wg.cu (the same tiles on Hopper's warpgroup
 * MMA). */
#ifndef OKV_CUDA_PREFILL_CUH
#define OKV_CUDA_PREFILL_CUH

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_mma.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#define PF_KC 64          /* keys per chunk */
#define PF_MIN_VECS 64    /* prefill-shaped: max rows of a sequence * group reaches this */

/* a CTA's work: a tile of a list and, when the call splits the keys, which part of the
 * list's chunks (the parts of a tile are consecutive items) */
struct pf_item { int list, tile, part; };

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
    /* split keys (n_parts > 1): part j of a tile reads chunks [j nch / n_parts, (j+1) nch /
     * n_parts) of its list and writes its vectors' O / l to part_o and (m, l) to part_ml at
     * ((item / n_parts) * BM + vector of the tile) * n_parts + j; pf_merge_k combines them */
    int n_parts, bm;
    float *part_o;
    float2 *part_ml;
};

/* (x0, x1) rounded to bf16, x0 in the low half (the lower column of a fragment) */
static __device__ __forceinline__ uint32_t pf_pack(float x0, float x1)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(x0, x1);
    return *(uint32_t *)&v;
}

/* A CTA's list (sequence s, KV head h), its vectors, and its chunks [c0, nch) of PF_KC keys
 * (the part of them its item reads when the keys are split). The wgmma kernel takes it and
 * pf_meta; the mma.sync kernel spells the same steps inline, since at 255 registers this
 * form costs it ~110 bytes of spills (ptxas, warps of 32 at head_dim 128). */
struct pf_span {
    struct pf_item item;
    int s, h, r0, nv, kv_len, base, nkeys, c0, nch;
};

static __device__ __forceinline__ struct pf_span pf_span_of(const struct pf_args &a)
{
    struct pf_span p;
    p.item = a.items[blockIdx.x];
    p.s = p.item.list / a.nkv;
    p.h = p.item.list % a.nkv;
    p.r0 = a.seq_row_off[p.s];
    p.nv = (a.seq_row_off[p.s + 1] - p.r0) * a.group;
    p.kv_len = a.seq_kv_len[p.s];
    p.base = a.blk_start[p.item.list];
    p.nkeys = (a.blk_start[p.item.list + 1] - p.base) * a.bs;
    const int nch_all = (p.nkeys + PF_KC - 1) / PF_KC;
    p.c0 = (int)((long long)nch_all * p.item.part / a.n_parts);
    p.nch = (int)((long long)nch_all * (p.item.part + 1) / a.n_parts);
    return p;
}

/* Vector v of a span (one query head of one row; v >= nv: none): its query (NULL for none) and
 * in *glim the keys it may see, positions below min(kv_len, its position + 1). */
template <int HD>
static __device__ __forceinline__ const float *pf_vec(const struct pf_args &a, const struct pf_span &sp, int v, int *glim)
{
    *glim = 0;
    if (v >= sp.nv)
        return NULL;
    const int row = a.seq_rows[sp.r0 + v / a.group], qh = sp.h * a.group + v % a.group;
    *glim = min(sp.kv_len, a.tok_pos[row] + 1);
    return a.q + ((size_t)row * a.n_heads + qh) * HD;
}

/* dims kk*16 + 2t, +1 (lo) and kk*16 + 8 + 2t, +1 (hi) of query qp times sc as bf16 pairs (the A
 * fragment's columns of an m16n8k16 row; zeros for no query) */
static __device__ __forceinline__ void pf_qpair(const float *qp, int kk, int t, float sc, uint32_t &lo, uint32_t &hi)
{
    lo = hi = 0u;
    if (qp) {
        const float2 x0 = *(const float2 *)(qp + kk * 16 + 2 * t);
        const float2 x1 = *(const float2 *)(qp + kk * 16 + 2 * t + 8);
        lo = pf_pack(x0.x * sc, x0.y * sc);
        hi = pf_pack(x1.x * sc, x1.y * sc);
    }
}

/* Vector v's output from this thread's accumulator fragments of it (n-tile n at o[4n + 2 half]
 * and o[4n + 2 half + 1], columns 8n + 2t, +1): O / l into out, or with split keys O / l and
 * (m, l) into the part's slots (pf_args); BM vectors a tile. */
template <int HD, int BM>
static __device__ __forceinline__ void pf_store(const struct pf_args &a, const struct pf_span &sp, int v, int t, int half,
                                                const float *o, float m, float l)
{
    const float il = l > 0.f ? 1.f / l : 0.f;
    float *op;
    if (a.n_parts == 1) {
        const int row = a.seq_rows[sp.r0 + v / a.group], qh = sp.h * a.group + v % a.group;
        op = a.out + ((size_t)row * a.n_heads + qh) * HD;
    } else {
        const size_t pi = ((size_t)(blockIdx.x / a.n_parts) * BM + (v - sp.item.tile * BM)) * a.n_parts + sp.item.part;
        op = a.part_o + pi * HD;
        if (t == 0)
            a.part_ml[pi] = make_float2(m, l);
    }
    op += 2 * t;
#pragma unroll
    for (int n = 0; n < HD / 8; n++)
        *(float2 *)(op + n * 8) = make_float2(o[4 * n + 2 * half] * il, o[4 * n + 2 * half + 1] * il);
}

/* The block of a warp's copy row `lane` of chunk ch (rpw rows a warp), loaded one chunk
 * ahead of its copy: unit mu, logical block mi (-1: no key), offset moff in the block. */
struct pf_meta {
    int mu = 0, mi = -1, moff = 0;
    __device__ __forceinline__ void load(const struct pf_args &a, int base, int nkeys, int nch, int ch, int warp, int rpw,
                                         int lane)
    {
        mi = -1;
        const int kj = ch * PF_KC + warp * rpw + lane;
        if (lane < rpw && ch < nch && kj < nkeys) {
            const int b = kj / a.bs;
            moff = kj - b * a.bs;
            mu = __ldg(a.blk_unit + base + b);
            mi = __ldg(a.blk_index + base + b);
        }
    }
};

/* Online softmax, base 2, over one m-tile's scores of a chunk: sc[NT * 4], n-tile n holding
 * rows g (sc[4n], sc[4n+1]) and g + 8 (sc[4n+2], sc[4n+3]) of the mma fragments, the quad
 * 4g..4g+3 sharing the rows. Takes the row maxima, turns sc into 2^(s - max), updates the
 * running max (m0, m1) and partial sums (l0, l1), and returns in al0, al1 the factor of
 * the output accumulated so far. */
template <int NT, int PARTS = 1>
static __device__ __forceinline__ void pf_softmax(float *sc, float &m0, float &m1, float &l0, float &l1, float &al0,
                                                  float &al1)
{
    static_assert(PARTS == 1 || PARTS == 2 || PARTS == 4, "parts: 1, 2 or 4");
    static_assert(NT % PARTS == 0, "n-tiles: a multiple of the parts");
    /* the row maxima and sums in PARTS parts each: shorter dependency chains, which the ALUs
     * overlap (a running max or sum over 2 NT values waits on each step), for registers */
    float q0[PARTS], q1[PARTS];
#pragma unroll
    for (int i = 0; i < PARTS; i++)
        q0[i] = q1[i] = -INFINITY;
#pragma unroll
    for (int n = 0; n < NT; n++) {
        q0[n % PARTS] = fmaxf(q0[n % PARTS], fmaxf(sc[4 * n], sc[4 * n + 1]));
        q1[n % PARTS] = fmaxf(q1[n % PARTS], fmaxf(sc[4 * n + 2], sc[4 * n + 3]));
    }
#pragma unroll
    for (int i = 1; i < PARTS; i++) {
        q0[0] = fmaxf(q0[0], q0[i]);
        q1[0] = fmaxf(q1[0], q1[i]);
    }
    float mx0 = q0[0], mx1 = q1[0];
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    al0 = m0 == -INFINITY ? 0.f : ex2(m0 - mn0);
    al1 = m1 == -INFINITY ? 0.f : ex2(m1 - mn1);
    const float ms0 = mn0 == -INFINITY ? 0.f : mn0, ms1 = mn1 == -INFINITY ? 0.f : mn1;
    float p0[PARTS], p1[PARTS];
#pragma unroll
    for (int i = 0; i < PARTS; i++)
        p0[i] = p1[i] = 0.f;
#pragma unroll
    for (int n = 0; n < NT; n++) {
        sc[4 * n + 0] = ex2(sc[4 * n + 0] - ms0);
        sc[4 * n + 1] = ex2(sc[4 * n + 1] - ms0);
        sc[4 * n + 2] = ex2(sc[4 * n + 2] - ms1);
        sc[4 * n + 3] = ex2(sc[4 * n + 3] - ms1);
        p0[n % PARTS] += sc[4 * n + 0] + sc[4 * n + 1];
        p1[n % PARTS] += sc[4 * n + 2] + sc[4 * n + 3];
    }
#pragma unroll
    for (int i = 1; i < PARTS; i++) {
        p0[0] += p0[i];
        p1[0] += p1[i];
    }
    const float ls0 = p0[0], ls1 = p1[0];
    l0 = l0 * al0 + ls0;
    l1 = l1 * al1 + ls1;
    m0 = mn0;
    m1 = mn1;
}

/* O's accumulator fragments (n-tile n: rows g at o[4n], o[4n+1], g + 8 at o[4n+2], o[4n+3])
 * times the factors pf_softmax returned for their rows */
template <int HD>
static __device__ __forceinline__ void pf_rescale(float *o, float al0, float al1)
{
#pragma unroll
    for (int n = 0; n < HD / 8; n++) {
        o[4 * n + 0] *= al0;
        o[4 * n + 1] *= al0;
        o[4 * n + 2] *= al1;
        o[4 * n + 3] *= al1;
    }
}

typedef void (*pf_fn)(const struct pf_args);
/* the warp-specialised kernel: the device tier as a tensor map of [rows][HD/64][64] bf16 */
typedef void (*pf_ws_fn)(const struct pf_args, const CUtensorMap);
struct pf_kern {
    pf_fn fn, merge;
    pf_ws_fn ws_fn;   /* set (and fn NULL) for the warp-specialised kernel */
    int threads, bm;
    int per_sm;  /* CTAs an SM it is made for (the split of few tiles' keys counts on them) */
    size_t smem;
    bool wg;     /* the warpgroup-MMA kernel (cuda_prefill_wg.cu) */
    bool wide;   /* the mma.sync kernel's default: tiles of 128 in 4 warps of 32 */
};

/* the warpgroup-MMA kernel for head_dim hd (64 or 128) into k (fn, threads, bm, smem, wg;
 * not merge); false when hd is not supported (cuda_prefill_wg.cu) */
bool okv_pf_wg_pick(int hd, struct pf_kern *k);
/* the warp-specialised kernel (cuda_prefill_ws.cu), likewise (ws_fn, fn NULL), its consumers
 * taking turns with pingpong */
bool okv_pf_ws_pick(int hd, bool pingpong, struct pf_kern *k);
/* Whether the warp-specialised kernel can read this device tier (block size a power of two
 * from 8 to 128, rows addressable by the TMA), and if so its tensor map into *tm: the tier as
 * [rows][hd/64][64] bf16, boxes of one 64-dim half of block_size rows, 128-byte swizzled. */
bool okv_pf_ws_tensor_map(const struct cuda_ctx *c, const struct okv_bkv *kv, CUtensorMap *tm);
/* whether the warp-specialised kernels were built with the register count their setmaxnreg
 * assumes (168 a thread at launch) */
bool okv_pf_ws_regs_ok(void);
/* whether this process runs the kernel's sm_90a machine code on the current device (a
 * one-thread probe: under a JIT of the compute_90 PTX the kernel is absent) */
bool okv_pf_wg_probe(void);

#endif
