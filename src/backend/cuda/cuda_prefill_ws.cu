/* Prefill attention, warp-specialised on Hopper (the FlashAttention-3 structure): the tiles of
 * cuda_prefill_wg.cu (128 query vectors of one list, its masks, online softmax, split keys and
 * merge) in CTAs of three warpgroups:
 *  - a producer warp (its warpgroup at 40 registers a thread, setmaxnreg) reads each chunk's
 *    block table, skips chunks and blocks that no row of the tile may see (the causal tail),
 *    and has the tensor memory accelerator copy each needed block's K and V (one TMA a block
 *    and 64-dim half, 128-byte swizzled as wgmma reads them) into rings of shared-memory
 *    stages (2 for K, 3 for V), each completing on its stage's mbarrier;
 *  - two consumer warpgroups (232 registers) of 64 query vectors each run S = Q K^T and
 *    O += P V on the warpgroup MMA in chunks of 128 keys, with the product of chunk j's scores
 *    issued before the previous chunk's P V, so that the softmax of chunk j runs on the ALUs
 *    while the tensor cores do P V of chunk j - 1 (intra-warpgroup overlap). A consumer frees a
 *    K stage once its scores are read and a V stage once its P V has completed.
 * The K ring carries per stage the chunk's block positions (for the masks) and an end mark
 * after the last chunk, so producer and consumers agree on the chunks without a count.
 *
 * A block is copied whole, so rows past a sequence's end or a row's limit arrive too: they are
 * masked like every other key past a limit, and their V must be finite (P = 0 times V):
 * both tiers are zeroed when they are made (cuda_kv.cu, cuda_pin.cu) and only ever receive
 * written KV, and the V stages are zeroed at the start (a block skipped in a chunk leaves
 * older V there). (The other prefill kernels copy no row past a limit.)
 *
 * Shared memory (1024-byte aligned regions, 128-byte swizzle as cuda_prefill_wg.cu):
 * Q [HD/64][128 rows][128 B], K stages [HD/64][128 keys][128 B] x 2, V stages x 3, then the
 * stages' block positions and headers and the mbarriers. hd 128: 193 KB; one CTA an SM.
 *
 * The consumers take turns to issue their products (named barriers), so that one's softmax runs
 * while the other's products hold the tensor cores; OKV_PREFILL_WS=1 lets them issue freely.
 * sm_90a only; OKV_PREFILL_WS=0 keeps cuda_prefill_wg.cu's kernel (bench/RESULTS.md section 34). */
#include "backend/cuda/cuda_mma.cuh"
#include "backend/cuda/cuda_prefill.cuh"
#include "backend/cuda/cuda_wgmma.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <limits.h>
#include <math.h>
#include <type_traits>

#define WS_THREADS 384   /* producer warpgroup + two consumer warpgroups */
#define WS_BM 128        /* query vectors a tile: 64 a consumer warpgroup */
#define WS_KC 128        /* keys a chunk */
#ifndef OKV_WS_NK
#define OKV_WS_NK 2      /* K stages (a build flag for experiments: -DOKV_WS_NK=3 fits 227 KB at hd 128) */
#endif
#ifndef OKV_WS_NV
#define OKV_WS_NV 3      /* V stages */
#endif
#define WS_NK OKV_WS_NK
#define WS_NV OKV_WS_NV
#define WS_PRODUCER_REGS 40    /* 40 + 2 x 232 = 3 x 168, the launch's count (okv_pf_ws_regs_ok) */
#define WS_CONSUMER_REGS 232

#define WS_FAR (INT_MAX / 2)   /* a block position no row reaches (missing blocks) */

/* a ring of N shared-memory stages: the next stage to use and the parity of that use */
template <int N>
struct ws_ring {
    int i = 0, ph = 0;
    __device__ __forceinline__ void next()
    {
        if (++i == N) {
            i = 0;
            ph ^= 1;
        }
    }
};

template <int HD>
struct ws_cfg {
    static constexpr int HALVES = HD / 64;
    static constexpr int REGION = WS_KC * 128 * HALVES;     /* bytes of one chunk's K (or V) */
    static constexpr int QBYTES = WS_BM * 128 * HALVES;     /* the tile's queries */
    static constexpr int OFF_K = QBYTES;
    static constexpr int OFF_V = OFF_K + WS_NK * REGION;
    static constexpr int OFF_POS = OFF_V + WS_NV * REGION;  /* int [WS_NK][WS_KC]: block positions */
    static constexpr int OFF_HDR = OFF_POS + WS_NK * WS_KC * 4;   /* int2 [WS_NK]: max position, end */
    static constexpr int OFF_BAR = OFF_HDR + WS_NK * 8;     /* u64: kfull, kempty [WS_NK], vfull, vempty [WS_NV] */
    static constexpr int BYTES = OFF_BAR + 2 * (WS_NK + WS_NV) * 8;
    static constexpr size_t SMEM = 1024 + (size_t)BYTES;
    static_assert(SMEM <= 232448, "the stages exceed an SM's 227 KB of shared memory");
    static_assert(HD == 64 || HD == 128, "head_dim 64 or 128");
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* one box of the tensor map (64 dims x bs rows of one half) into shared memory, completing on bar */
static __device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *tm, int half, int row, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"((uint64_t)tm), "r"(0), "r"(half), "r"(row), "r"(bar)
                 : "memory");
}
static __device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/* The producer warp: chunk by chunk, lane b takes block b of the chunk (WS_KC / bs <= 32 of
 * them): its position, and, when a row of the tile may see it, one TMA per 64-dim half for its
 * K (then its V) into the next K (V) stage, whose mbarrier expects the bytes. */
template <int HD>
static __device__ __forceinline__ void ws_produce(const struct pf_args &a, const CUtensorMap *tm, const struct pf_span &sp,
                                                  int c0, int c1, int lim, int lbs, unsigned char *smem, uint32_t sbase)
{
    typedef ws_cfg<HD> C;
    const int lane = threadIdx.x & 31, bs = a.bs, nbc = WS_KC >> lbs;
    const int nblk = sp.nkeys >> lbs;
    int *sbp = (int *)(smem + C::OFF_POS);
    int2 *hdr = (int2 *)(smem + C::OFF_HDR);
    const uint32_t kfull = sbase + C::OFF_BAR, kempty = kfull + 8 * WS_NK;
    const uint32_t vfull = kempty + 8 * WS_NK, vempty = vfull + 8 * WS_NV;
    const uint32_t bbytes = (uint32_t)bs * 128u;   /* one box */
    ws_ring<WS_NK> kr;
    ws_ring<WS_NV> vr;
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)tm) : "memory");
    for (int ch = c0; ch < c1; ch++) {
        const int b = ch * nbc + lane;
        int bpos = WS_FAR, row = 0;
        if (lane < nbc && b < nblk) {
            const int mu = __ldg(a.blk_unit + sp.base + b), mi = __ldg(a.blk_index + sp.base + b);
            bpos = mi * bs;
            row = (int)(okv_cuda_unit_global(mu, a.layer_off, a.stage_off) * (a.unit_elems / HD));
        }
        const bool need = bpos < lim;
        const unsigned nm = __ballot_sync(0xffffffffu, need);
        if (!nm)
            continue;   /* no row of the tile sees a key of this chunk */
        /* the chunk's last key position (WS_FAR where a block is missing): a chunk below every
         * row's limit needs no mask; lanes past the chunk's blocks do not count */
        const int mx = __reduce_max_sync(0xffffffffu, lane >= nbc ? INT_MIN : bpos < WS_FAR ? bpos + bs - 1 : WS_FAR);
        const uint32_t bytes = (uint32_t)__popc(nm) * C::HALVES * bbytes;
        /* this lane's block (rows row ...) into its rows of a stage, both halves, on the stage's
         * mbarrier, which lane 0 has told to expect the chunk's bytes */
        auto load = [&](uint32_t stage, int row0, uint32_t full) {
            if (lane == 0)
                mbar_expect(full, bytes);
            __syncwarp();
            if (need)
#pragma unroll
                for (int h = 0; h < C::HALVES; h++)
                    tma_load(stage + (uint32_t)(h * WS_KC * 128 + lane * bs * 128), tm, h, row0, full);
        };
        mbar_wait(kempty + 8 * kr.i, kr.ph ^ 1);
        if (lane < nbc)
            sbp[kr.i * WS_KC + lane] = bpos;
        if (lane == 0)
            hdr[kr.i] = make_int2(mx, 0);
        __syncwarp();
        load(sbase + (uint32_t)(C::OFF_K + kr.i * C::REGION), row, kfull + 8 * kr.i);
        mbar_wait(vempty + 8 * vr.i, vr.ph ^ 1);
        load(sbase + (uint32_t)(C::OFF_V + vr.i * C::REGION), row + bs, vfull + 8 * vr.i);
        kr.next();
        vr.next();
    }
    /* the end mark in the next K stage */
    mbar_wait(kempty + 8 * kr.i, kr.ph ^ 1);
    if (lane == 0) {
        hdr[kr.i] = make_int2(WS_FAR, 1);
        mbar_arrive(kfull + 8 * kr.i);
    }
}
#endif

/* PP: the consumer warpgroups take turns to issue their products (named barriers 2 and 3), so
 * that one's softmax runs while the other's products hold the tensor cores */
template <int HD, bool PP>
static __global__ void __launch_bounds__(WS_THREADS, 1) pf_ws_k(const struct pf_args a, const __grid_constant__ CUtensorMap tm)
{
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();
#else
    typedef ws_cfg<HD> C;
    constexpr int NT = WS_KC / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(smem_raw);
    unsigned char *smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    unsigned char *sq = smem;
    __shared__ int s_lim, s_gmin[2];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const struct pf_span sp = pf_span_of(a);
    const struct pf_item item = sp.item;
    const int lbs = __ffs(a.bs) - 1;   /* bs: a power of two from 8 to WS_KC (okv_pf_ws_tensor_map) */
    /* this kernel's chunks are of WS_KC keys: the part's share of them */
    const int nch_all = (sp.nkeys + WS_KC - 1) / WS_KC;
    const int c0 = (int)((long long)nch_all * item.part / a.n_parts);
    const int c1 = (int)((long long)nch_all * (item.part + 1) / a.n_parts);
    const uint32_t kfull = sbase + C::OFF_BAR, kempty = kfull + 8 * WS_NK;
    const uint32_t vfull = kempty + 8 * WS_NK, vempty = vfull + 8 * WS_NV;
    if (threadIdx.x == 0) {
        s_lim = 0;
        s_gmin[0] = s_gmin[1] = INT_MAX;
        for (int i = 0; i < WS_NK; i++) {
            mbar_init(kfull + 8 * i, 1);     /* the producer's expect_tx (or end mark), then the bytes */
            mbar_init(kempty + 8 * i, 256);  /* the consumers' threads */
        }
        for (int i = 0; i < WS_NV; i++) {
            mbar_init(vfull + 8 * i, 1);
            mbar_init(vempty + 8 * i, 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();   /* the limits' initial values before the consumers' atomics */

    /* consumers: their queries into shared memory, their rows' limits, zeros in the V stages */
    const int cw = warp - 4, wgi = cw >> 2;   /* consumer warp 0..7, its warpgroup */
    const int g = lane >> 2, t = lane & 3;
    const int w0 = cw * 16, v0 = item.tile * WS_BM + w0 + g;
    int glim[2] = {0, 0};
    bool vok[2] = {false, false};
    if (warp >= 4) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int v = v0 + 8 * half, tr = w0 + g + 8 * half;
            const float *qp = pf_vec<HD>(a, sp, v, &glim[half]);
            vok[half] = qp != NULL;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                uint32_t lo, hi;
                pf_qpair(qp, kk, t, a.scale_log2, lo, hi);
                *(uint32_t *)(sq + wg_off(tr, 2 * kk, WS_BM) + 4 * t) = lo;
                *(uint32_t *)(sq + wg_off(tr, 2 * kk + 1, WS_BM) + 4 * t) = hi;
            }
        }
        for (int i = threadIdx.x - 128; i < WS_NV * C::REGION / 16; i += 256)
            *(uint4 *)(smem + C::OFF_V + 16 * i) = make_uint4(0u, 0u, 0u, 0u);
        const int wmax = __reduce_max_sync(0xffffffffu, max(glim[0], glim[1]));
        const int wmin = __reduce_min_sync(0xffffffffu, min(vok[0] ? glim[0] : INT_MAX, vok[1] ? glim[1] : INT_MAX));
        fence_proxy_async();   /* the queries and zeros, written by this thread, for the async proxy */
        if (lane == 0) {
            atomicMax(&s_lim, wmax);
            atomicMin(&s_gmin[wgi], wmin);
        }
    }
    __syncthreads();
    const int lim = s_lim;

    if (warp < 4) {
        setmaxnreg_dec<WS_PRODUCER_REGS>();
        if (warp == 0)
            ws_produce<HD>(a, &tm, sp, c0, c1, lim, lbs, smem, sbase);
        return;
    }
    setmaxnreg_inc<WS_CONSUMER_REGS>();
    const int gmin = s_gmin[wgi];   /* chunks below every row's limit need no mask */
    const int *sbp = (const int *)(smem + C::OFF_POS);
    const int2 *hdr = (const int2 *)(smem + C::OFF_HDR);
    const uint32_t q_addr = sbase + (uint32_t)(wgi * 64 * 128);   /* the warpgroup's 64 rows */

    float o[HD / 2];   /* O: 64 x HD a warpgroup, n-tile n in o[4n .. 4n+3] */
#pragma unroll
    for (int n = 0; n < HD / 2; n++)
        o[n] = 0.f;
    float sc[WS_KC / 2];   /* S of the current chunk, then its P */
#pragma unroll
    for (int i = 0; i < WS_KC / 2; i++)
        sc[i] = 0.f;
    uint32_t pa[WS_KC / 16][4];   /* P of the previous chunk as bf16 A fragments */
#pragma unroll
    for (int k = 0; k < WS_KC / 16; k++)
        pa[k][0] = pa[k][1] = pa[k][2] = pa[k][3] = 0u;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    ws_ring<WS_NK> kr;
    ws_ring<WS_NV> vr;
    ws_ring<WS_NV> pr;   /* the V stage of the previous chunk, whose P V is pending */

    /* descriptors: one a stage, the steps along it added to the start address field (the low 14
     * bits of the address >> 4, which no offset within shared memory carries out of) */
    const uint64_t dq0 = wg_desc(q_addr, 16, 1024);
    auto issue_pv = [&](int vs) {
        const uint64_t dv0 = wg_desc(sbase + (uint32_t)(C::OFF_V + vs * C::REGION), (uint32_t)(WS_KC * 128), 1024);
#pragma unroll
        for (int k16 = 0; k16 < WS_KC / 16; k16++) {
            const uint64_t dv = dv0 + (uint64_t)(k16 * 16 * 128 / 16);
            if constexpr (HD == 128)
                wgmma_rs_n128(o, pa[k16], dv);
            else
                wgmma_rs_n64(o, pa[k16], dv);
        }
        wg_commit();
    };
    /* every consumer thread arrives once its own reads are done: no branch while a wgmma is in
     * flight (ptxas serializes every wgmma of a kernel whose pipeline it cannot follow) */
    auto release = [&](uint32_t bar) { mbar_arrive(bar); };

    auto issue_s = [&]() {
        const uint64_t dk0 = wg_desc(sbase + (uint32_t)(C::OFF_K + kr.i * C::REGION), 16, 1024);
        /* every register the products read (O, P, S) written before the fence: were the
         * compiler to move a write past it, ptxas would serialize every wgmma of the kernel */
        wg_pin(o);
        wg_pin(pa);
        wg_pin(sc);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const uint64_t dq = dq0 + (uint64_t)(((kk >> 2) * WS_BM * 128 + (kk & 3) * 32) / 16);
            const uint64_t dk = dk0 + (uint64_t)(((kk >> 2) * WS_KC * 128 + (kk & 3) * 32) / 16);
            wgmma_ss_n128(sc, dq, dk, kk > 0);
        }
        wg_commit();
    };
    /* the chunk's masks where some key is at or past some row's limit (M), then its K stage is
     * free; the online softmax turns S into P */
    auto mask_softmax = [&](auto masked, float &al0, float &al1) {
        wg_pin(sc);
        if constexpr (decltype(masked)::value) {
            const int *bp = sbp + kr.i * WS_KC;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const int k = n * 8 + 2 * t;   /* keys k, k + 1: one block (bs is even) */
                const int kp = bp[k >> lbs] + (k & (a.bs - 1));
                sc[4 * n + 0] = kp < glim[0] ? sc[4 * n + 0] : -INFINITY;
                sc[4 * n + 1] = kp + 1 < glim[0] ? sc[4 * n + 1] : -INFINITY;
                sc[4 * n + 2] = kp < glim[1] ? sc[4 * n + 2] : -INFINITY;
                sc[4 * n + 3] = kp + 1 < glim[1] ? sc[4 * n + 3] : -INFINITY;
            }
        }
        release(kempty + 8 * kr.i);
        pf_softmax<NT, 4>(sc, m0, m1, l0, l1, al0, al1);
    };
    /* O rescaled by the new maxima, P kept as the next P V's A fragments; next stages */
    auto rescale_pack = [&](float al0, float al1) {
        /* no product in flight here: a branch costs nothing, and once the maxima settle (long
         * prompts) most chunks leave them unchanged */
        if (!__all_sync(0xffffffffu, al0 == 1.f && al1 == 1.f))
            pf_rescale<HD>(o, al0, al1);
#pragma unroll
        for (int k16 = 0; k16 < WS_KC / 16; k16++) {
            pa[k16][0] = pf_pack(sc[8 * k16 + 0], sc[8 * k16 + 1]);
            pa[k16][1] = pf_pack(sc[8 * k16 + 2], sc[8 * k16 + 3]);
            pa[k16][2] = pf_pack(sc[8 * k16 + 4], sc[8 * k16 + 5]);
            pa[k16][3] = pf_pack(sc[8 * k16 + 6], sc[8 * k16 + 7]);
        }
        pr = vr;
        kr.next();
        vr.next();
    };
    /* a chunk after the first: its S issued before the previous chunk's P V, its softmax while
     * that P V runs; no branch while a product is in flight (ptxas would wait for it there),
     * hence a body for masked chunks and one for the others */
    auto step = [&](auto masked) {
        float al0, al1;
        if (PP)
            named_sync(2 + wgi, 256);
        issue_s();
        mbar_wait(vfull + 8 * pr.i, pr.ph);
        wg_fence();
        issue_pv(pr.i);
        if (PP)
            named_arrive(3 - wgi, 256);
        wg_wait<1>();
        mask_softmax(masked, al0, al1);
        wg_wait<0>();
        wg_pin(o);
        release(vempty + 8 * pr.i);
        rescale_pack(al0, al1);
    };

    if (PP && wgi == 1)
        named_arrive(2, 256);   /* warpgroup 0 issues first */
    mbar_wait(kfull + 8 * kr.i, kr.ph);
    int2 h = hdr[kr.i];
    /* the tests through votes: their results are warp-uniform, so the stage indices and addresses
     * behind them stay in uniform registers (wgmma takes its descriptors from there) */
    if (!__any_sync(0xffffffffu, h.y)) {
        /* the first chunk alone: no P V before it */
        if (PP)
            named_sync(2 + wgi, 256);
        issue_s();
        if (PP)
            named_arrive(3 - wgi, 256);
        wg_wait<0>();
        float al0, al1;
        mask_softmax(std::true_type(), al0, al1);
        rescale_pack(al0, al1);
        for (;;) {
            mbar_wait(kfull + 8 * kr.i, kr.ph);
            h = hdr[kr.i];
            if (__any_sync(0xffffffffu, h.y))
                break;
            if (__all_sync(0xffffffffu, h.x < gmin))
                step(std::false_type());
            else
                step(std::true_type());
        }
        mbar_wait(vfull + 8 * pr.i, pr.ph);
        wg_pin(o);
        wg_pin(pa);
        wg_fence();
        issue_pv(pr.i);
        wg_wait<0>();
        wg_pin(o);
        release(vempty + 8 * pr.i);
    }
    if (PP && wgi == 0)
        named_sync(2, 256);   /* the turn warpgroup 1 passed last, so no arrival is left pending */

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
#pragma unroll
    for (int half = 0; half < 2; half++)
        if (vok[half])
            pf_store<HD, WS_BM>(a, sp, v0 + 8 * half, t, half, o, half ? m1 : m0, half ? l1 : l0);
#endif
}

bool okv_pf_ws_pick(int hd, bool pingpong, struct pf_kern *k)
{
    k->threads = WS_THREADS;
    k->bm = WS_BM;
    k->wg = true;
    k->wide = false;
    k->per_sm = 1;
    k->fn = NULL;
    switch (hd) {
    case 64: k->ws_fn = pingpong ? pf_ws_k<64, true> : pf_ws_k<64, false>; k->smem = ws_cfg<64>::SMEM; return true;
    case 128: k->ws_fn = pingpong ? pf_ws_k<128, true> : pf_ws_k<128, false>; k->smem = ws_cfg<128>::SMEM; return true;
    default: return false;
    }
}

bool okv_pf_ws_tensor_map(const struct cuda_ctx *c, const struct okv_bkv *kv, CUtensorMap *tm)
{
    const int bs = kv->g.block_size, hd = kv->g.head_dim;
    if (!c->tmap_encode || bs < 8 || bs > WS_KC || (bs & (bs - 1)) || (hd != 64 && hd != 128))
        return false;
    const size_t rows = (kv->total_units + 2 * (size_t)kv->g.n_stage_units) * kv->unit_elems / (size_t)hd;
    if (rows == 0 || rows >= (size_t)INT_MAX)   /* the TMA's row coordinate is a signed 32-bit int */
        return false;
    const cuuint64_t dims[3] = {64, (cuuint64_t)(hd / 64), (cuuint64_t)rows};
    const cuuint64_t strides[2] = {128, (cuuint64_t)hd * sizeof(okv_bf16)};
    const cuuint32_t box[3] = {64, 1, (cuuint32_t)bs}, estr[3] = {1, 1, 1};
    PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)c->tmap_encode;
    return enc(tm, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, kv->dev, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool okv_pf_ws_regs_ok(void)
{
    /* setmaxnreg moves registers between the warpgroups of a CTA allocated at exactly
     * WS_THREADS x 168 (40 + 2 x 232 = 3 x 168): with any other count the consumers' request could
     * wait forever, so the kernel is used only as ptxas built it */
    const void *fns[4] = {(const void *)pf_ws_k<64, false>, (const void *)pf_ws_k<64, true>, (const void *)pf_ws_k<128, false>,
                          (const void *)pf_ws_k<128, true>};
    for (int i = 0; i < 4; i++) {
        struct cudaFuncAttributes at;
        if (cudaFuncGetAttributes(&at, fns[i]) != cudaSuccess || at.numRegs != 168) {
            (void)cudaGetLastError();
            return false;
        }
    }
    return true;
}
