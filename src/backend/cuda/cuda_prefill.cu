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
 * tile of BM = 16*WM*NW consecutive query vectors of one list and walks the list's whole
 * key range once; there is no split over keys (a prefill chunk has R*group/BM tiles per
 * list, enough CTAs to fill the GPU). Tiles: 128 vectors in 4 warps of 32 (WM = 2, the
 * default), 128 in 8 warps of 16, 64 in 4 warps of 16, 256 in 8 warps of 32.
 *
 *  - Chunks of 64 keys are copied to shared memory (K and V rows padded to HD+8
 *    bf16, conflict-free ldmatrix) with cp.async, double-buffered: the copy of chunk
 *    j+1 is in flight while chunk j is computed. Warp w copies rows [w*64/NW, ...)
 *    of the chunk; lane i of it resolves the unit of row i (blk_unit, blk_index one
 *    chunk ahead, staging units through stage_off) and the warp shares the row
 *    offsets with shuffles. Keys at or past the tile's limit (max over its vectors
 *    of min(p+1, kv_len)) and keys past the list are zero-filled and never read from
 *    HBM; their positions go to shared memory for the masks.
 *  - Warp w owns WM m-tiles of 16 vectors, the rows of the mma A operand. Its query
 *    (fp32, scaled by scale*log2(e)) is converted to bf16 once: A fragments in
 *    registers when WM * HD <= 128, else rows in shared memory read by ldmatrix. S = Q K^T
 *    and O += P V use mma.sync.m16n8k16 (bf16 in, fp32 accumulate), K fragments by
 *    ldmatrix, V by ldmatrix.trans; each fragment feeds 2 WM products, so warps of 32
 *    vectors read shared memory half as often per product as warps of 16 (the limit of
 *    the latter: 239 against 312 TFLOPS on an 8B-shaped layer at 32K). Online softmax in
 *    fp32, base 2 (running max and sum per row); P is rounded to bf16 for P V. A warp
 *    skips a chunk none of whose keys any of its vectors reads, and applies the
 *    per-element mask only to chunks holding a key that some of its vectors must not read.
 *  - Output: O / l in fp32 (0 for a vector that reads no key).
 *
 * Precision: Q and P are rounded to bf16 (relative 2^-9), K and V are bf16 already;
 * the decode kernel's hi/lo split is not used here (it would double the tensor work).
 *
 * On by default (OKV_PREFILL_KERNEL=0 turns it off, OKV_PREFILL_WARP_ROWS=16 takes warps
 * of 16; read when the context is created, see cuda_backend.cu) for head_dim 64 and 128:
 * a call's sequences with rows * group >= PF_MIN_VECS come here, the others of the same
 * call go to the decode kernel. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_mma.cuh"
#include "backend/cuda/cuda_prefill.cuh"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

template <int HD, int NW, int WM>
struct pf_cfg {
    static constexpr int BM = 16 * WM * NW;     /* query vectors per tile */
    static constexpr int ROW = HD + 8;          /* padded shared-memory row, bf16 elements */
    static constexpr int RPW = PF_KC / NW;      /* chunk rows each warp copies */
    static constexpr int P = HD / 8;            /* 16-byte pieces per row */
    static constexpr int ITERS = RPW * P / 32;  /* copy steps per warp and chunk (K and V each) */
    /* the query fragments: in registers (WM * HD / 4 a thread) up to 32 of them, else in
     * shared memory, each warp's rows read by ldmatrix at every 16 dims */
    static constexpr bool QSM = WM * HD > 128;
    static constexpr size_t STAGE = (size_t)2 * PF_KC * ROW * sizeof(okv_bf16);   /* K then V */
    static constexpr size_t QBYTES = QSM ? (size_t)BM * ROW * sizeof(okv_bf16) : 0;
    static constexpr size_t SMEM = 2 * STAGE + QBYTES + (size_t)2 * PF_KC * sizeof(int);
    /* resident CTAs to fit the registers for: 4 warps of 16 rows: 3 CTAs (<= 168 registers,
     * no spills at head_dim 128); 4 warps of 32 rows: 2 (<= 255); 8 warps: 1 */
    static constexpr int MINB = NW == 4 ? (WM == 1 ? 3 : 2) : 1;
    static_assert(HD % 16 == 0 && PF_KC == 64 && PF_KC % NW == 0 && RPW <= 32 && (RPW * P) % 32 == 0 && (WM == 1 || WM == 2),
                  "shape");
};

/* Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16): lane = 4g + t. A (16 x 16,
 * row-major): a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same), a2 = (row g, cols
 * 2t+8, 2t+9), a3 = (row g+8, same). B (16 x 8): b0 = (rows 2t, 2t+1, col g), b1 =
 * (rows 2t+8, 2t+9, col g). C (16 x 8): c0, c1 = (row g, cols 2t, 2t+1), c2, c3 =
 * (row g+8, same). So the scores of row g are c0, c1 and those of row g+8 c2, c3, and
 * two adjacent 8-key tiles of C are the A fragment of a 16-key step of P V.
 *
 * A warp owns WM m-tiles of 16 vectors (16 WM consecutive vectors of the tile): each K or
 * V fragment read from shared memory feeds 2 WM products (WM = 2 halves the shared-memory
 * reads a product, at the price of twice the accumulators). Thread (g, t) holds, in
 * m-tile m, the vectors of rows g (half 0) and g + 8 (half 1): index 2m + half below. */
template <int HD, int NW, int WM>
static __global__ void __launch_bounds__(NW * 32, pf_cfg<HD, NW, WM>::MINB) pf_attn_k(const struct pf_args a)
{
    typedef pf_cfg<HD, NW, WM> C;
    constexpr int KC = PF_KC, ROW = C::ROW, P = C::P, RPW = C::RPW, NT = KC / 8, NV = 2 * WM;
    constexpr bool QSM = C::QSM;
    extern __shared__ __align__(16) unsigned char smem[];
    okv_bf16 *skv = (okv_bf16 *)smem;                            /* [2 stages][K, V][KC][ROW] */
    okv_bf16 *sq = (okv_bf16 *)(smem + 2 * C::STAGE);            /* [BM][ROW] (QSM) */
    int *skp = (int *)(smem + 2 * C::STAGE + C::QBYTES);         /* [2 stages][KC] key positions (INT_MAX: none) */
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
    const int nch_all = (nkeys + KC - 1) / KC;
    const int c0 = (int)((long long)nch_all * item.part / a.n_parts);
    const int nch = (int)((long long)nch_all * (item.part + 1) / a.n_parts);   /* chunks [c0, nch) */

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
    load_meta(c0);   /* early: the latency overlaps the query loads */

    /* the warp's first vector is w0, this thread's first v0 */
    const int w0 = warp * 16 * WM, v0 = item.tile * C::BM + w0 + g;
    uint32_t qa[QSM ? 1 : WM][QSM ? 1 : HD / 16][4];
    int glim[NV];    /* vector i reads keys kp < glim[i] */
    bool vok[NV];
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int m = i >> 1, half = i & 1;
        const int v = v0 + 16 * m + 8 * half;
        vok[i] = v < nv;
        glim[i] = 0;
        const float *qp = NULL;
        if (vok[i]) {
            const int row = a.seq_rows[r0 + v / a.group], qh = h * a.group + v % a.group;
            glim[i] = min(kv_len, a.tok_pos[row] + 1);
            qp = a.q + ((size_t)row * a.n_heads + qh) * HD;
        }
        const float sc = a.scale_log2;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            uint32_t lo = 0u, hi = 0u;
            if (qp) {
                const float2 x0 = *(const float2 *)(qp + kk * 16 + 2 * t);
                const float2 x1 = *(const float2 *)(qp + kk * 16 + 2 * t + 8);
                lo = pf_pack(x0.x * sc, x0.y * sc);
                hi = pf_pack(x1.x * sc, x1.y * sc);
            }
            if constexpr (QSM) {
                okv_bf16 *d = sq + (size_t)(w0 + 16 * m + 8 * half + g) * ROW + kk * 16 + 2 * t;
                *(uint32_t *)d = lo;
                *(uint32_t *)(d + 8) = hi;
            } else {
                qa[QSM ? 0 : m][QSM ? 0 : kk][half] = lo;
                qa[QSM ? 0 : m][QSM ? 0 : kk][2 + half] = hi;
            }
        }
    }
    /* warp limits: some vector reads keys below wmax, every vector reads those below wmin */
    int wmax = 0, wmin = INT_MAX;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        wmax = max(wmax, glim[i]);
        wmin = min(wmin, vok[i] ? glim[i] : INT_MAX);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
        wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
    }
    if (threadIdx.x == 0)
        s_lim = 0;
    __syncthreads();   /* also: the warp's query rows are in shared memory (QSM) */
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

    float o[WM][HD / 8][4];
#pragma unroll
    for (int m = 0; m < WM; m++)
#pragma unroll
        for (int n = 0; n < HD / 8; n++)
            o[m][n][0] = o[m][n][1] = o[m][n][2] = o[m][n][3] = 0.f;
    float mrun[NV], lrun[NV];   /* running max and sum (l partial over the quad) */
#pragma unroll
    for (int i = 0; i < NV; i++) {
        mrun[i] = -INFINITY;
        lrun[i] = 0.f;
    }

    if (c0 < nch)
        issue(c0);
    cp_async_commit();
    for (int ch = c0; ch < nch; ch++) {
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
            /* S = Q K^T: 8 key tiles of 8 for each m-tile */
            float sc[WM][NT][4];
#pragma unroll
            for (int m = 0; m < WM; m++)
#pragma unroll
                for (int n = 0; n < NT; n++)
                    sc[m][n][0] = sc[m][n][1] = sc[m][n][2] = sc[m][n][3] = 0.f;
            /* x4 of K: keys +0..7 dims +0..7, keys +0..7 dims +8..15, keys +8..15 dims +0..7, keys +8..15 dims +8..15 */
            const okv_bf16 *kr = kb + ((lane >> 4) * 8 + (lane & 7)) * ROW + ((lane >> 3) & 1) * 8;
            if constexpr (QSM) {
                /* each 16 dims: the query fragments once (x4 of Q: rows +0..7 dims +0..7,
                 * rows +8..15 dims +0..7, rows +0..7 dims +8..15, rows +8..15 dims +8..15),
                 * then every key step */
#pragma unroll
                for (int kk = 0; kk < HD / 16; kk++) {
                    uint32_t af[WM][4];
#pragma unroll
                    for (int m = 0; m < WM; m++)
                        ldsm_x4(af[m], sq + (size_t)(w0 + 16 * m + (lane & 15)) * ROW + kk * 16 + (lane >> 4) * 8);
#pragma unroll
                    for (int k16 = 0; k16 < KC / 16; k16++) {
                        uint32_t b[4];
                        ldsm_x4(b, kr + k16 * 16 * ROW + kk * 16);
#pragma unroll
                        for (int m = 0; m < WM; m++) {
                            mma_bf16(sc[m][2 * k16], af[m], b[0], b[1]);
                            mma_bf16(sc[m][2 * k16 + 1], af[m], b[2], b[3]);
                        }
                    }
                }
            } else {
#pragma unroll
                for (int k16 = 0; k16 < KC / 16; k16++)
#pragma unroll
                    for (int kk = 0; kk < HD / 16; kk++) {
                        uint32_t b[4];
                        ldsm_x4(b, kr + k16 * 16 * ROW + kk * 16);
#pragma unroll
                        for (int m = 0; m < WM; m++) {
                            mma_bf16(sc[m][2 * k16], qa[QSM ? 0 : m][QSM ? 0 : kk], b[0], b[1]);
                            mma_bf16(sc[m][2 * k16 + 1], qa[QSM ? 0 : m][QSM ? 0 : kk], b[2], b[3]);
                        }
                    }
            }
            if (!nomask) {
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    const int2 kp2 = *(const int2 *)(kpb + n * 8 + 2 * t);
#pragma unroll
                    for (int m = 0; m < WM; m++) {
                        sc[m][n][0] = kp2.x < glim[2 * m] ? sc[m][n][0] : -INFINITY;
                        sc[m][n][1] = kp2.y < glim[2 * m] ? sc[m][n][1] : -INFINITY;
                        sc[m][n][2] = kp2.x < glim[2 * m + 1] ? sc[m][n][2] : -INFINITY;
                        sc[m][n][3] = kp2.y < glim[2 * m + 1] ? sc[m][n][3] : -INFINITY;
                    }
                }
            }
            /* online softmax, base 2, each m-tile's rows; the outputs so far scaled */
#pragma unroll
            for (int m = 0; m < WM; m++) {
                float al0, al1;
                pf_softmax<NT>(&sc[m][0][0], mrun[2 * m], mrun[2 * m + 1], lrun[2 * m], lrun[2 * m + 1], al0, al1);
#pragma unroll
                for (int n = 0; n < HD / 8; n++) {
                    o[m][n][0] *= al0;
                    o[m][n][1] *= al0;
                    o[m][n][2] *= al1;
                    o[m][n][3] *= al1;
                }
            }
            /* O += P V: key steps of 16, dim tiles of 8 */
#pragma unroll
            for (int k16 = 0; k16 < KC / 16; k16++) {
                uint32_t pa[WM][4];
#pragma unroll
                for (int m = 0; m < WM; m++) {
                    pa[m][0] = pf_pack(sc[m][2 * k16][0], sc[m][2 * k16][1]);
                    pa[m][1] = pf_pack(sc[m][2 * k16][2], sc[m][2 * k16][3]);
                    pa[m][2] = pf_pack(sc[m][2 * k16 + 1][0], sc[m][2 * k16 + 1][1]);
                    pa[m][3] = pf_pack(sc[m][2 * k16 + 1][2], sc[m][2 * k16 + 1][3]);
                }
                /* x4.trans: keys +0..7 dims +0..7, keys +8..15 dims +0..7, keys +0..7 dims +8..15, keys +8..15 dims +8..15 */
                const okv_bf16 *vr = vb + (k16 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * ROW + (lane >> 4) * 8;
#pragma unroll
                for (int dp = 0; dp < HD / 16; dp++) {
                    uint32_t b[4];
                    ldsm_x4_t(b, vr + dp * 16);
#pragma unroll
                    for (int m = 0; m < WM; m++) {
                        mma_bf16(o[m][2 * dp], pa[m], b[0], b[1]);
                        mma_bf16(o[m][2 * dp + 1], pa[m], b[2], b[3]);
                    }
                }
            }
        }
        __syncthreads();   /* stage ch & 1 is free for chunk ch+2 */
    }
    cp_async_wait<0>();

#pragma unroll
    for (int i = 0; i < NV; i++) {
#pragma unroll
        for (int x = 1; x <= 2; x <<= 1)
            lrun[i] += __shfl_xor_sync(0xffffffffu, lrun[i], x);
    }
    /* the item's coordinates again (reloaded rather than kept in registers through the loop) */
    const struct pf_item it = a.items[blockIdx.x];
    const int hh = it.list % a.nkv, rr0 = a.seq_row_off[it.list / a.nkv];
    const int vv0 = it.tile * C::BM + w0 + g;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        if (!vok[i])
            continue;
        const int m = i >> 1, half = i & 1;
        const int v = vv0 + 16 * m + 8 * half;
        const float il = lrun[i] > 0.f ? 1.f / lrun[i] : 0.f;
        float *op;
        if (a.n_parts == 1) {
            const int row = a.seq_rows[rr0 + v / a.group], qh = hh * a.group + v % a.group;
            op = a.out + ((size_t)row * a.n_heads + qh) * HD;
        } else {
            const size_t pi = ((size_t)(blockIdx.x / a.n_parts) * C::BM + (v - it.tile * C::BM)) * a.n_parts + it.part;
            op = a.part_o + pi * HD;
            if (t == 0)
                a.part_ml[pi] = make_float2(mrun[i], lrun[i]);
        }
        op += 2 * t;
#pragma unroll
        for (int n = 0; n < HD / 8; n++)
            *(float2 *)(op + n * 8) = make_float2(o[m][n][2 * half] * il, o[m][n][2 * half + 1] * il);
    }
}

/* The parts of split tiles combined: one CTA a tile (its parts' first item), a warp a
 * vector; O = sum_j w_j O_j / sum_j w_j with w_j = l_j 2^(m_j - max m) over the parts that
 * read a key (0 when none did). */
template <int HD>
static __global__ void __launch_bounds__(256) pf_merge_k(const struct pf_args a)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, np = a.n_parts;
    const struct pf_item item = a.items[(size_t)blockIdx.x * np];
    const int s = item.list / a.nkv, h = item.list % a.nkv;
    const int r0 = a.seq_row_off[s], nv = (a.seq_row_off[s + 1] - r0) * a.group;
    for (int vt = warp; vt < a.bm; vt += 8) {
        const int v = item.tile * a.bm + vt;
        if (v >= nv)
            break;
        const size_t pi = ((size_t)blockIdx.x * a.bm + vt) * np;
        float mx = -INFINITY;
        for (int j = 0; j < np; j++) {
            const float2 ml = a.part_ml[pi + j];
            if (ml.y > 0.f)
                mx = fmaxf(mx, ml.x);
        }
        float wsum = 0.f, acc[HD / 32];
#pragma unroll
        for (int d = 0; d < HD / 32; d++)
            acc[d] = 0.f;
        for (int j = 0; j < np; j++) {
            const float2 ml = a.part_ml[pi + j];
            if (!(ml.y > 0.f))
                continue;
            const float w = ml.y * exp2f(ml.x - mx);
            wsum += w;
            const float *po = a.part_o + (pi + j) * HD;
#pragma unroll
            for (int d = 0; d < HD / 32; d++)
                acc[d] += w * po[d * 32 + lane];
        }
        const float iw = wsum > 0.f ? 1.f / wsum : 0.f;
        const int row = a.seq_rows[r0 + v / a.group], qh = h * a.group + v % a.group;
        float *op = a.out + ((size_t)row * a.n_heads + qh) * HD;
#pragma unroll
        for (int d = 0; d < HD / 32; d++)
            op[d * 32 + lane] = acc[d] * iw;
    }
}

/* ---- host ---- */

template <int HD, int NW, int WM>
static void pf_info(struct pf_kern *k)
{
    k->fn = pf_attn_k<HD, NW, WM>;
    k->ws_fn = NULL;
    k->merge = pf_merge_k<HD>;
    k->wg = false;
    k->wide = NW == 4 && WM == 2;
    k->threads = NW * 32;
    k->per_sm = 2;
    k->bm = pf_cfg<HD, NW, WM>::BM;
    k->smem = pf_cfg<HD, NW, WM>::SMEM;
}

/* the kernel of a tile size (c->prefill_kernel: 64, 128 or 256 query vectors) and warp
 * rows (c->prefill_wrows: 16 or 32 vectors a warp): 64 = 4 warps of 16; 128 = 8 warps of
 * 16 or 4 of 32; 256 = 8 warps of 32 */
template <int HD>
static void pf_pick_hd(int bm, int wrows, size_t smem_max, struct pf_kern *k)
{
    if (bm == 64)
        pf_info<HD, 4, 1>(k);
    else if (bm == 256)
        pf_info<HD, 8, 2>(k);
    else if (wrows == 32)
        pf_info<HD, 4, 2>(k);
    else
        pf_info<HD, 8, 1>(k);
    /* a GPU with less shared memory a block (e.g. 99 KB): the queries of warps of 32 at
     * head_dim 128 do not fit; 8 warps of 16, then 4, keep theirs in registers */
    if (k->smem > smem_max)
        pf_info<HD, 8, 1>(k);
    if (k->smem > smem_max)
        pf_info<HD, 4, 1>(k);
}

static bool pf_pick(int hd, const struct cuda_ctx *c, struct pf_kern *k)
{
    switch (hd) {
    case 64: pf_pick_hd<64>(c->prefill_kernel, c->prefill_wrows, c->smem_optin, k); return true;
    case 128: pf_pick_hd<128>(c->prefill_kernel, c->prefill_wrows, c->smem_optin, k); return true;
    default: return false;
    }
}

extern "C" int okv_cuda_prefill_min_rows(const struct cuda_ctx *c, int head_dim, int group)
{
    struct pf_kern k;
    if (c->prefill_kernel == 0 || group <= 0 || !pf_pick(head_dim, c, &k) || k.smem > c->smem_optin)
        return INT_MAX;
    const int min_rows = (PF_MIN_VECS + group - 1) / group;
    return c->step.max_rows_per_seq >= min_rows ? min_rows : INT_MAX;
}

/* function attributes belong to the device: set once per kernel and context */
static enum okv_status pf_prepare(struct cuda_ctx *c, const struct pf_kern *k)
{
    const void *fn = k->ws_fn ? (const void *)k->ws_fn : (const void *)k->fn;
    for (int i = 0; i < c->pf_n_seen; i++)
        if (c->pf_seen[i] == fn)
            return OKV_OK;
    OKV_CU(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k->smem), "prefill attention smem limit");
    OKV_CU(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, 100), "prefill attention smem carveout");
    if (c->pf_n_seen < (int)(sizeof c->pf_seen / sizeof c->pf_seen[0]))
        c->pf_seen[c->pf_n_seen++] = fn;
    return OKV_OK;
}

struct pf_order { int nb, list; };

/* tiles of bm query vectors over the call's prefill-shaped sequences (the decode kernel
 * takes those with fewer than min_rows rows) */
static long long pf_count(const int32_t *roff, int n_lists, int nkv, int group, int min_rows, int bm)
{
    long long n = 0;
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv;
        if (roff[s + 1] - roff[s] >= min_rows)
            n += ((long long)(roff[s + 1] - roff[s]) * group + bm - 1) / bm;
    }
    return n;
}

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
    if (!pf_pick(hd, c, &k) || k.smem > c->smem_optin)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda prefill attention: head_dim %d not supported", hd);
    const int32_t *roff = c->step.h_row_off;
    int maxch = 0;   /* chunks of 64 keys of the call's longest prefill-shaped list */
    for (int li = 0; li < n_lists; li++) {
        const int s = li / nkv;
        const int ch = (int)(((long long)(p->h_start[li + 1] - p->h_start[li]) * kv->g.block_size + 63) / 64);
        if (roff[s + 1] - roff[s] >= p->min_rows && ch > maxch)
            maxch = ch;
    }
    /* the same tiles on the warpgroup MMA: warp-specialised with TMA copies (cuda_prefill_ws.cu)
     * where the tier allows its tensor map and the lists are long enough to repay its start
     * (OKV_PREFILL_WS_MIN_KEYS; OKV_PREFILL_WS=1 or 2 takes it for any list), else in two
     * warpgroups, two CTAs an SM (cuda_prefill_wg.cu) */
    CUtensorMap tm;
    if (c->prefill_wgmma && k.bm == 128) {
        struct pf_kern w = k;
        if (c->prefill_ws && (c->prefill_ws_forced || 64LL * maxch >= c->prefill_ws_min_keys) &&
            okv_pf_ws_tensor_map(c, kv, &tm) && okv_pf_ws_pick(hd, c->prefill_ws == 2, &w) && w.smem <= c->smem_optin)
            k = w;
        else if (okv_pf_wg_pick(hd, &w) && w.smem <= c->smem_optin)
            k = w;
    }
    long long n_items = pf_count(roff, n_lists, nkv, group, p->min_rows, k.bm);
    if (n_items == 0)
        return OKV_OK;
    /* Too few tiles for the GPU (at most one an SM) split the keys: the tiles of 128 run up to
     * per_sm CTAs an SM (two; the warp-specialised kernel one), so a call of n tiles takes
     * per_sm SMs / n parts (at most 8, and at least 8 chunks of 64 keys a part), merged after
     * (H200, bench/RESULTS.md section 18). OKV_PREFILL_SPLIT=N forces N parts (1: none). */
    int parts = c->prefill_split;
    if (parts <= 0) {
        parts = 1;
        if (c->prefill_auto && k.bm == 128 && n_items <= c->n_sms) {
            parts = (int)((long long)k.per_sm * c->n_sms / n_items);
            parts = parts > 8 ? 8 : parts;
            parts = parts > maxch / 8 ? maxch / 8 : parts;
            parts = parts < 1 ? 1 : parts;
        }
    }
    parts = parts > 64 ? 64 : parts;
    /* unsplit, the default by the call's tiles of 128 against the SMs: at most half the
     * SMs busy (small models: 2 KV heads, GQA 2, a 2048-row chunk of a short prompt is 64
     * tiles), tiles of 64 in 4 warps of 16 put twice the SMs to work (92 -> 125 TFLOPS); at
     * most one tile an SM, 8 warps of 16 hide more latency than 4 of 32 (8B shape, a 512-row
     * chunk: 15.1K against 14.3K prefill tokens/s); more tiles than SMs, 4 warps of 32 (two
     * CTAs an SM: 313 against 239 TFLOPS) */
    if (parts == 1 && c->prefill_auto && k.wide) {
        if (2 * n_items <= c->n_sms) {
            if (hd == 64)
                pf_info<64, 4, 1>(&k);
            else
                pf_info<128, 4, 1>(&k);
            n_items = pf_count(roff, n_lists, nkv, group, p->min_rows, k.bm);
        } else if (n_items <= c->n_sms) {
            if (hd == 64)
                pf_info<64, 8, 1>(&k);
            else
                pf_info<128, 8, 1>(&k);
        }
    }
    enum okv_status st;
    if ((st = pf_prepare(c, &k)) != OKV_OK)
        return st;
    /* CTAs: lists by decreasing length, a list's tiles last first (causal: the later
     * rows read more keys), so the longest items start first and the tiles of one
     * list run side by side (its K/V stay in L2) */
    if (n_items * parts > INT_MAX)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda prefill attention: %lld tiles", n_items);
    float *part = NULL;
    const size_t n_po = (size_t)n_items * k.bm * parts * hd;
    if (parts > 1 && (st = okv_cuda_scratch(c, n_po + (size_t)n_items * k.bm * parts * 2, &part)) != OKV_OK)
        return st;
    struct pf_order *ord = (struct pf_order *)okv_malloc(sizeof *ord * (size_t)n_lists, OKV_TAG_BACKEND);
    if (!ord)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda prefill attention: out of host memory");
    for (int li = 0; li < n_lists; li++)
        ord[li] = (struct pf_order){p->h_start[li + 1] - p->h_start[li], li};
    qsort(ord, (size_t)n_lists, sizeof *ord, pf_order_cmp);
    void *hp = NULL, *dp = NULL;
    const size_t bytes = sizeof(struct pf_item) * (size_t)n_items * parts;
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
            for (int j = 0; j < parts; j++)
                items[at++] = (struct pf_item){li, tt, j};
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
    a.n_parts = parts;
    a.bm = k.bm;
    a.part_o = part;
    a.part_ml = (float2 *)(part ? part + n_po : NULL);
    if (k.ws_fn)
        k.ws_fn<<<(unsigned)(n_items * parts), k.threads, k.smem, c->stream>>>(a, tm);
    else
        k.fn<<<(unsigned)(n_items * parts), k.threads, k.smem, c->stream>>>(a);
    OKV_LAUNCHED("prefill attention kernel");
    if (parts > 1) {
        k.merge<<<(unsigned)n_items, 256, 0, c->stream>>>(a);
        OKV_LAUNCHED("prefill attention merge kernel");
    }
    return okv_cuda_ring_commit(c, c->stream);
}
