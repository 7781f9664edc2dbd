/* Prefill attention on Hopper's warpgroup MMA (wgmma): the tiles of cuda_prefill.cu's
 * kernels (128 query vectors of one list, chunks of 64 keys double-buffered by cp.async, the
 * same masks, online softmax, split keys and merge), with S = Q K^T and O += P V issued as
 * wgmma.mma_async by two warpgroups of 64 vectors each instead of mma.sync by warps.
 *
 * Shared memory holds Q (the tile's vectors, scaled by scale*log2(e), bf16), and each
 * chunk's K and V, in the canonical 128-byte-swizzled layout wgmma reads: rows of 64 bf16
 * (128 bytes) by 64-dim halves, [half][row][128 B], the 16-byte piece c of row r stored at
 * piece c ^ (r % 8) (the swizzle works on address bits, so each region starts on 1024 bytes).
 *  - S (64 vectors x 64 keys, per warpgroup) = Q K^T: A = Q and B = K both K-major by
 *    descriptor (stride between 8-row groups 1024 bytes), one m64n64k16 per 16 dims; a step
 *    of 16 dims moves the start address 32 bytes within the 128-byte row, a 64-dim half
 *    moves to the next region.
 *  - O (64 x HD) += P V: A = P from registers (the accumulator fragments of S, rounded to
 *    bf16, are the A fragments of a 16-key step, as with mma.sync), B = V read N-major
 *    (imm-trans-b): stride between 8-key groups 1024 bytes, between 64-dim halves one
 *    region; one m64nHDk16 per 16 keys.
 * The accumulator fragments of m64nN are those of mma.m16n8k16 for each warp's 16 rows,
 * n-tile by n-tile, so the softmax and the output are the mma.sync kernel's. The copies land
 * through the generic proxy and wgmma reads through the async proxy: fence.proxy.async
 * between them.
 *
 * The default's tiles of 128 on a 9.0 device (OKV_PREFILL_WGMMA=0 keeps cuda_prefill.cu's
 * mma.sync kernel); sm_90a machine code only. Two CTAs an SM (128 registers), so one CTA's
 * softmax overlaps the other's products. */
#include "backend/cuda/cuda_mma.cuh"
#include "backend/cuda/cuda_prefill.cuh"
#include "backend/cuda/cuda_wgmma.cuh"

#include <limits.h>
#include <math.h>

#define WG_THREADS 256   /* two warpgroups */
#define WG_BM 128        /* query vectors a tile: 64 a warpgroup, 16 a warp */

template <int HD>
struct wg_cfg {
    static constexpr int KC = PF_KC;
    static constexpr int HALVES = HD / 64;
    static constexpr int REGION = KC * 128 * HALVES;        /* bytes of one chunk's K (or V) */
    static constexpr int STAGE = 2 * REGION;                /* K then V */
    static constexpr int QBYTES = WG_BM * 128 * HALVES;     /* the tile's queries */
    static constexpr int RPW = KC / 8;                      /* chunk rows each warp copies */
    static constexpr int P = HD / 8;                        /* 16-byte pieces a row */
    static constexpr int ITERS = RPW * P / 32;
    static constexpr size_t SMEM = 1024 + QBYTES + 2 * (size_t)STAGE + 2 * KC * sizeof(int);
    static_assert(HD == 64 || HD == 128, "head_dim 64 or 128");
    static_assert((RPW * P) % 32 == 0, "copy steps");
};


template <int HD>
static __global__ void __launch_bounds__(WG_THREADS, 2) pf_wg_k(const struct pf_args a)
{
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();
#else
    typedef wg_cfg<HD> C;
    constexpr int KC = C::KC, P = C::P, RPW = C::RPW, NT = KC / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    /* 1024-byte aligned base: Q, then two stages of K and V, then the key positions */
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(smem_raw);
    unsigned char *smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    unsigned char *sq = smem;
    unsigned char *skv = smem + C::QBYTES;
    int *skp = (int *)(smem + C::QBYTES + 2 * C::STAGE);
    __shared__ int s_lim;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wgi = warp >> 2;
    const int g = lane >> 2, t = lane & 3;
    const struct pf_span sp = pf_span_of(a);
    const struct pf_item item = sp.item;
    const int bs = a.bs, c0 = sp.c0, nch = sp.nch;
    const int base = sp.base, nkeys = sp.nkeys;
    struct pf_meta meta;
    meta.load(a, base, nkeys, nch, c0, warp, RPW, lane);   /* early: the latency overlaps the query loads */

    /* this thread's vectors: rows g and g + 8 of its warp's 16 (the tile's 16 warp + ...) */
    const int w0 = warp * 16, v0 = item.tile * WG_BM + w0 + g;
    int glim[2];
    bool vok[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int v = v0 + 8 * half, tr = w0 + g + 8 * half;   /* tr: row in the tile */
        const float *qp = pf_vec<HD>(a, sp, v, &glim[half]);
        vok[half] = qp != NULL;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            uint32_t lo, hi;
            pf_qpair(qp, kk, t, a.scale_log2, lo, hi);
            /* dims kk*16 + 2t (piece 2kk) and kk*16 + 8 + 2t (piece 2kk + 1), 4 bytes at 4t within the piece */
            *(uint32_t *)(sq + wg_off(tr, 2 * kk, WG_BM) + 4 * t) = lo;
            *(uint32_t *)(sq + wg_off(tr, 2 * kk + 1, WG_BM) + 4 * t) = hi;
        }
    }
    int wmax = max(glim[0], glim[1]);
    int wmin = min(vok[0] ? glim[0] : INT_MAX, vok[1] ? glim[1] : INT_MAX);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
        wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
    }
    /* the warpgroup's limits: its wgmma covers all four warps' rows */
    __shared__ int s_gmax[2], s_gmin[2];
    if (threadIdx.x == 0) {
        s_lim = 0;
        s_gmax[0] = s_gmax[1] = 0;
        s_gmin[0] = s_gmin[1] = INT_MAX;
    }
    fence_proxy_async();   /* the queries, written by this thread, for wgmma's reads */
    __syncthreads();
    if (lane == 0) {
        atomicMax(&s_lim, wmax);
        atomicMax(&s_gmax[wgi], wmax);
        atomicMin(&s_gmin[wgi], wmin);
    }
    __syncthreads();
    const int lim = s_lim;
    const int gmax = s_gmax[wgi], gmin = s_gmin[wgi];

    auto issue = [&](int ch) {
        unsigned char *kb = skv + (size_t)(ch & 1) * C::STAGE, *vb = kb + C::REGION;
        int kp = INT_MAX;
        long long koff = 0;
        if (meta.mi >= 0) {
            kp = meta.mi * bs + meta.moff;
            koff = okv_cuda_unit_global(meta.mu, a.layer_off, a.stage_off) * a.unit_elems + (long long)meta.moff * HD;
        }
        if (lane < RPW)
            skp[(ch & 1) * KC + warp * RPW + lane] = kp;
        const unsigned vm = __ballot_sync(0xffffffffu, kp < lim);
        meta.load(a, base, nkeys, nch, ch + 1, warp, RPW, lane);
#pragma unroll
        for (int it = 0; it < C::ITERS; it++) {
            const int i = it * 32 + lane, r = i / P, c = i % P;
            const long long ro = __shfl_sync(0xffffffffu, koff, r);
            const bool rv = (vm >> r) & 1u;
            const okv_bf16 *src = a.dev + (rv ? ro + c * 8 : 0);
            const int dr = warp * RPW + r, off = wg_off(dr, c, KC);
            cp_async16(kb + off, src, rv ? 16 : 0);
            cp_async16(vb + off, rv ? src + (size_t)bs * HD : src, rv ? 16 : 0);
        }
    };

    float o[HD / 2];   /* O: 64 x HD a warpgroup, n-tile n in o[4n .. 4n+3] */
#pragma unroll
    for (int n = 0; n < HD / 2; n++)
        o[n] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    const uint32_t q_addr = sbase + (uint32_t)(wgi * 64 * 128);   /* the warpgroup's 64 rows */

    if (c0 < nch)
        issue(c0);
    cp_async_commit();
    for (int ch = c0; ch < nch; ch++) {
        if (ch + 1 < nch)
            issue(ch + 1);
        cp_async_commit();
        cp_async_wait<1>();
        fence_proxy_async();   /* this thread's copies of chunk ch, for wgmma's reads */
        __syncthreads();
        const int *kpb = skp + (ch & 1) * KC;
        const int ka = kpb[lane], kc = kpb[lane + 32];
        /* the warpgroup decides together (a wgmma is one instruction of its four warps): every
         * warp holds the same positions and the group's limits, so each warp's vote agrees */
        const bool need = ka < gmax || kc < gmax;
        const bool full = ka < gmin && kc < gmin;
        if (__any_sync(0xffffffffu, need)) {
            const bool nomask = __all_sync(0xffffffffu, full);
            const uint32_t k_addr = sbase + (uint32_t)(C::QBYTES + (ch & 1) * C::STAGE);
            const uint32_t v_addr = k_addr + C::REGION;
            float sc[KC / 2];
#pragma unroll
            for (int i = 0; i < KC / 2; i++)
                sc[i] = 0.f;
            wg_pin(sc);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                const uint32_t qa = q_addr + (uint32_t)((kk >> 2) * WG_BM * 128 + (kk & 3) * 32);
                const uint32_t kb = k_addr + (uint32_t)((kk >> 2) * KC * 128 + (kk & 3) * 32);
                wgmma_ss_n64(sc, wg_desc(qa, 16, 1024), wg_desc(kb, 16, 1024));
            }
            wg_commit();
            wg_wait0();
            wg_pin(sc);
            if (!nomask) {
#pragma unroll
                for (int n = 0; n < NT; n++) {
                    const int2 kp2 = *(const int2 *)(kpb + n * 8 + 2 * t);
                    sc[4 * n + 0] = kp2.x < glim[0] ? sc[4 * n + 0] : -INFINITY;
                    sc[4 * n + 1] = kp2.y < glim[0] ? sc[4 * n + 1] : -INFINITY;
                    sc[4 * n + 2] = kp2.x < glim[1] ? sc[4 * n + 2] : -INFINITY;
                    sc[4 * n + 3] = kp2.y < glim[1] ? sc[4 * n + 3] : -INFINITY;
                }
            }
            float al0, al1;
            pf_softmax<NT>(sc, m0, m1, l0, l1, al0, al1);
            pf_rescale<HD>(o, al0, al1);
            wg_pin(o);
            wg_fence();
#pragma unroll
            for (int k16 = 0; k16 < KC / 16; k16++) {
                uint32_t pa[4];
                pa[0] = pf_pack(sc[8 * k16 + 0], sc[8 * k16 + 1]);
                pa[1] = pf_pack(sc[8 * k16 + 2], sc[8 * k16 + 3]);
                pa[2] = pf_pack(sc[8 * k16 + 4], sc[8 * k16 + 5]);
                pa[3] = pf_pack(sc[8 * k16 + 6], sc[8 * k16 + 7]);
                const uint64_t dv = wg_desc(v_addr + (uint32_t)(k16 * 16 * 128), (uint32_t)(KC * 128), 1024);
                if constexpr (HD == 128)
                    wgmma_rs_n128(o, pa, dv);
                else
                    wgmma_rs_n64(o, pa, dv);
            }
            wg_commit();
            wg_wait0();
            wg_pin(o);
        }
        __syncthreads();
    }
    cp_async_wait<0>();

#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, x);
        l1 += __shfl_xor_sync(0xffffffffu, l1, x);
    }
#pragma unroll
    for (int half = 0; half < 2; half++)
        if (vok[half])
            pf_store<HD, WG_BM>(a, sp, v0 + 8 * half, t, half, o, half ? m1 : m0, half ? l1 : l0);
#endif
}

static __global__ void pf_wg_probe_k(int *out)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *out = 1;
#else
    *out = 0;
#endif
}

bool okv_pf_wg_probe(void)
{
    int *d = NULL, h = 0;
    if (cudaMalloc((void **)&d, sizeof(int)) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    pf_wg_probe_k<<<1, 1>>>(d);
    const bool ok = cudaGetLastError() == cudaSuccess && cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
    (void)cudaGetLastError();
    return ok && h == 1;
}

bool okv_pf_wg_pick(int hd, struct pf_kern *k)
{
    k->threads = WG_THREADS;
    k->bm = WG_BM;
    k->wg = true;
    k->wide = false;
    k->per_sm = 2;
    switch (hd) {
    case 64: k->fn = pf_wg_k<64>; k->smem = wg_cfg<64>::SMEM; return true;
    case 128: k->fn = pf_wg_k<128>; k->smem = wg_cfg<128>::SMEM; return true;
    default: return false;
    }
}
