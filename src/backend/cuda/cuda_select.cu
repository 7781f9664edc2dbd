/* Block selection on the GPU, every request of a call in one pass.
 *
 * One packed upload (per-request table, rows, candidates), then two launches over all
 * requests at once:
 *  - scoring: the Quest bound sum_d max(q_d*kmin_d, q_d*kmax_d) of every (request,
 *    candidate, KV head), maximised over the GQA group's query heads and the request's
 *    rows: quest_coop_k, one lane per candidate, the warp's summary loads coalesced through
 *    shared memory (quest_lane_k, each lane loading its own, where head_dim % 16 != 0 or a
 *    request has more than 8 queries; quest_k, one warp per SEL_CPW candidates, where
 *    head_dim % 8 != 0); with per-token key codes, codes_mma_k on the tensor cores
 *    (codes_k where the shape does not fit it). Candidates find their requests by binary
 *    search of the candidate offsets.
 *  - topk_k: one CTA per (request, KV head): a radix select (8-bit digits, MSB first)
 *    of the k smallest 64-bit keys (~ordered score, block id), which is score
 *    descending then lower block id, the CPU reference's order; then a bitonic sort
 *    of those k keys in shared memory. Segments of up to SEL_STAGE_MAX candidates are
 *    staged in shared memory; longer ones are read from global memory (L2) each pass.
 * Then one copy of all ids back (and one of the scores when asked) and one sync.
 * A request with k > SEL_SORT_MAX (more than the shared memory sorts) is sorted on
 * the host from the copied scores. */
#include "backend/cuda/cuda_bench.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_mma.cuh"
#include "backend/cuda/cuda_sort.cuh"

#include <cuda_pipeline.h>

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEL_WARPS 8
#define SEL_CPW 4           /* candidates per warp of the scoring kernel */
#define SEL_TOPK_THREADS 512
#define SEL_STAGE_MAX 8192   /* candidates of one segment staged in shared memory */
#define SEL_SORT_MAX 16384   /* k sorted on the GPU; larger k sorts on the host */

/* request table: SEL_META int32 per request. M_CAND_OFF numbers the candidates of all
 * requests in one flat sequence (the scoring grid); M_CAND_SRC is where the request's
 * candidate ids start in the candidate array (the same offset when they were uploaded
 * with the request; their place in a device table of host block ids otherwise) */
enum { M_ROW_OFF, M_N_ROWS, M_CAND_OFF, M_N_CAND, M_K, M_OUT_OFF, M_SC_OFF, M_CAND_SRC, SEL_META = 8 };

static __device__ __forceinline__ float4 bf4_to_f4(uint2 a)
{
    return make_float4(__uint_as_float(a.x << 16), __uint_as_float(a.x & 0xffff0000u), __uint_as_float(a.y << 16),
                       __uint_as_float(a.y & 0xffff0000u));
}

/* the request of flat candidate c: the last one whose candidates start at or before it */
static __device__ __forceinline__ int request_of(const int32_t *meta, int n_reqs, int c)
{
    int r = 0, hi = n_reqs - 1;
    while (r < hi) {
        const int mid = (r + hi + 1) >> 1;
        if (__ldg(meta + mid * SEL_META + M_CAND_OFF) <= c)
            r = mid;
        else
            hi = mid - 1;
    }
    return r;
}

/* the block of candidate c0 + lane of a warp's nc consecutive candidates (lanes past nc take
 * c0's); r is c0's request */
static __device__ __forceinline__ int lane_block(const int32_t *meta, int n_reqs, const int32_t *cand, int r, int c0, int nc,
                                                 int lane)
{
    const int gc = c0 + (lane < nc ? lane : 0);
    while (r + 1 < n_reqs && __ldg(meta + (r + 1) * SEL_META + M_CAND_OFF) <= gc)
        r++;
    const int32_t *ml = meta + r * SEL_META;
    return __ldg(cand + __ldg(ml + M_CAND_SRC) + (gc - __ldg(ml + M_CAND_OFF)));
}

/* One warp scores SEL_CPW consecutive candidates of one KV head: the summaries of all
 * of them are loaded (16-byte loads) before any arithmetic, so that each warp keeps
 * SEL_CPW KiB in flight (hd 128): the kernel is bound by HBM, and a single candidate
 * per warp left it latency-bound at a fifth of the bandwidth. SLOTS float4 per lane
 * cover hd <= 128 * SLOTS. */
template <int SLOTS>
static __global__ void __launch_bounds__(SEL_WARPS * 32)
quest_k(const float *q, const okv_bf16 *summ, const int32_t *meta, int n_reqs, const int32_t *rows, const int32_t *cand,
        int total_cand, int n_heads, int nkv, int hd, float *scores)
{
    const int h = blockIdx.y, lane = threadIdx.x & 31;
    const int c0 = (blockIdx.x * SEL_WARPS + (threadIdx.x >> 5)) * SEL_CPW;
    if (c0 >= total_cand)
        return;
    const int hd4 = hd >> 2, nc = min(SEL_CPW, total_cand - c0);
    int r = request_of(meta, n_reqs, c0);
    const int my_blk = lane_block(meta, n_reqs, cand, r, c0, nc, lane);
    float4 mn[SEL_CPW][SLOTS], mx[SEL_CPW][SLOTS];
#pragma unroll
    for (int j = 0; j < SEL_CPW; j++) {
        const int blk = __shfl_sync(0xffffffffu, my_blk, j < nc ? j : 0);
        /* bf16 summaries: 4 dimensions per 8-byte load */
        const uint2 *kmin = (const uint2 *)(summ + ((size_t)blk * nkv + h) * 2 * hd), *kmax = kmin + hd4;
#pragma unroll
        for (int t = 0; t < SLOTS; t++) {
            const int d4 = lane + 32 * t;
            const bool ok = d4 < hd4;
            mn[j][t] = ok ? bf4_to_f4(__ldg(kmin + d4)) : make_float4(0.f, 0.f, 0.f, 0.f);
            mx[j][t] = ok ? bf4_to_f4(__ldg(kmax + d4)) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
    const int group = n_heads / nkv;
#pragma unroll
    for (int j = 0; j < SEL_CPW; j++) {
        const int gc = c0 + j;
        if (j >= nc)
            break;
        while (r + 1 < n_reqs && __ldg(meta + (r + 1) * SEL_META + M_CAND_OFF) <= gc)
            r++;
        const int32_t *m = meta + r * SEL_META;
        const int n_rows = __ldg(m + M_N_ROWS);
        const int32_t *rr = rows + __ldg(m + M_ROW_OFF);
        float best = -INFINITY;
        for (int ri = 0; ri < n_rows; ri++)
            for (int g = 0; g < group; g++) {
                const float4 *qv = (const float4 *)(q + ((size_t)__ldg(rr + ri) * n_heads + (size_t)h * group + g) * hd);
                float sum = 0.f;
#pragma unroll
                for (int t = 0; t < SLOTS; t++) {
                    const int d4 = lane + 32 * t;
                    if (d4 < hd4) {
                        const float4 a = __ldg(qv + d4), lo = mn[j][t], up = mx[j][t];
                        sum += fmaxf(a.x * lo.x, a.x * up.x) + fmaxf(a.y * lo.y, a.y * up.y) +
                               fmaxf(a.z * lo.z, a.z * up.z) + fmaxf(a.w * lo.w, a.w * up.w);
                    }
                }
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    sum += __shfl_xor_sync(0xffffffffu, sum, o);
                best = fmaxf(best, sum);
            }
        if (lane == 0)
            scores[(size_t)__ldg(m + M_SC_OFF) + (size_t)h * __ldg(m + M_N_CAND) + (gc - __ldg(m + M_CAND_OFF))] = best;
    }
}

/* Quest's bound with one lane per candidate (quest_lane_k; the default for head_dim % 8 == 0,
 * OKV_QUEST_LANE=0 takes quest_k): a lane sums max(q_d kmin_d, q_d kmax_d) over d in order, as
 * the CPU backend does (the same float operations, so the same scores from the same summaries),
 * for up to QL_QT queries at once, reading its block's summaries in 16-byte pieces (8 bf16) and
 * the queries' in 32-byte pieces that the lanes of one request share. quest_k spends a 5-step
 * shuffle reduction on every (candidate, query); here there is none (a selection call of 64
 * requests x 8 KV heads x 2000 candidates: 0.52 ms against 0.75; bench/RESULTS.md section 17). */
#define QL_THREADS 128
#define QL_QT 4            /* queries a pass */
static __global__ void __launch_bounds__(QL_THREADS)
quest_lane_k(const float *q, const okv_bf16 *summ, const int32_t *meta, int n_reqs, const int32_t *rows, const int32_t *cand,
             int total_cand, int n_heads, int nkv, int hd, float *scores)
{
    const int c = blockIdx.x * QL_THREADS + threadIdx.x, h = blockIdx.y;
    const bool live = c < total_cand;
    const int cc = live ? c : total_cand - 1;
    const int r = request_of(meta, n_reqs, cc);
    const int32_t *m = meta + r * SEL_META;
    const int blk = __ldg(cand + __ldg(m + M_CAND_SRC) + (cc - __ldg(m + M_CAND_OFF)));
    const int group = n_heads / nkv, n_q = __ldg(m + M_N_ROWS) * group, hd8 = hd >> 3;
    const int32_t *rr = rows + __ldg(m + M_ROW_OFF);
    const uint4 *kmin = (const uint4 *)(summ + ((size_t)blk * nkv + h) * 2 * hd), *kmax = kmin + hd8;
    /* the warp's most queries: lanes of requests with fewer skip the rest */
    int n_q_w = n_q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        n_q_w = max(n_q_w, __shfl_xor_sync(0xffffffffu, n_q_w, o));
    float best = -INFINITY;
    for (int q0 = 0; q0 < n_q_w; q0 += QL_QT) {
        const float4 *qp[QL_QT];
        float s[QL_QT];
#pragma unroll
        for (int u = 0; u < QL_QT; u++) {
            const int n = q0 + u < n_q ? q0 + u : 0;
            qp[u] = (const float4 *)(q + ((size_t)__ldg(rr + n / group) * n_heads + (size_t)h * group + n % group) * hd);
            s[u] = 0.f;
        }
        for (int x = 0; x < hd8; x++) {
            const uint4 a = __ldg(kmin + x), b = __ldg(kmax + x);
            const unsigned av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
            float lo[8], hi[8];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                lo[2 * e] = __uint_as_float(av[e] << 16), lo[2 * e + 1] = __uint_as_float(av[e] & 0xffff0000u);
                hi[2 * e] = __uint_as_float(bv[e] << 16), hi[2 * e + 1] = __uint_as_float(bv[e] & 0xffff0000u);
            }
#pragma unroll
            for (int u = 0; u < QL_QT; u++) {
                if (q0 + u >= n_q)
                    break;
                const float4 q0v = __ldg(qp[u] + 2 * x), q1v = __ldg(qp[u] + 2 * x + 1);
                const float qq[8] = {q0v.x, q0v.y, q0v.z, q0v.w, q1v.x, q1v.y, q1v.z, q1v.w};
#pragma unroll
                for (int e = 0; e < 8; e++)
                    s[u] = __fadd_rn(s[u], fmaxf(__fmul_rn(qq[e], lo[e]), __fmul_rn(qq[e], hi[e])));
            }
        }
#pragma unroll
        for (int u = 0; u < QL_QT; u++)
            if (q0 + u < n_q)
                best = fmaxf(best, s[u]);
    }
    if (live)
        scores[(size_t)__ldg(m + M_SC_OFF) + (size_t)h * __ldg(m + M_N_CAND) + (cc - __ldg(m + M_CAND_OFF))] = best;
}

/* Quest's bound with the warp's loads coalesced (quest_coop_k; the default where head_dim % 16 == 0
 * and no request has more than 8 queries, OKV_QUEST_COOP=0 takes quest_lane_k). quest_lane_k's
 * lanes each read their own block's summaries, 16 bytes at a time, so a warp load touches 32 lines
 * and uses half of each sector it fetches: Nsight Compute finds it bound by L1/L2 transactions, not
 * by HBM (bench/RESULTS.md section 28). Here a warp scores 32 candidates (a lane each, the same
 * float operations in the same order as quest_lane_k and the CPU backend) in stages of 16 channels:
 * the warp copies the stage's kmin and kmax pieces of all its 32 candidates into shared memory with
 * cp.async, each candidate's 32 contiguous bytes of kmin and of kmax read by two adjacent lanes (a
 * whole sector), two stages in flight while the lanes score the one before from shared memory.
 * Shared memory: QC_WARPS x 2 stages x 32 candidates x QC_PITCH pieces of 16 bytes (5 KiB a warp;
 * the pitch of 5 pieces keeps the lanes' 16-byte reads, a phase of 8 lanes, on distinct banks; the
 * cp.async writes of a phase meet at most two to a bank), and q_stride float4 a warp
 * for its request's queries (0: they are read from q; bench/RESULTS.md section 30). */
#define QC_WARPS 4
#define QC_PITCH 5
template <int QMAX>
static __global__ void __launch_bounds__(QC_WARPS * 32)
quest_coop_k(const float *q, const okv_bf16 *summ, const int32_t *meta, int n_reqs, const int32_t *rows, const int32_t *cand,
             int total_cand, int n_heads, int nkv, int hd, int q_stride, float *scores)
{
    __shared__ uint4 s_piece[QC_WARPS][2][32 * QC_PITCH];
    extern __shared__ float4 s_q[];   /* q_stride float4 a warp: its request's queries */
    const int wi = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int c = blockIdx.x * (QC_WARPS * 32) + threadIdx.x, h = blockIdx.y;
    if (blockIdx.x * (QC_WARPS * 32) + wi * 32 >= total_cand)
        return;   /* whole warps only: no block-wide barrier below */
    const bool live = c < total_cand;
    const int cc = live ? c : total_cand - 1;
    const int r = request_of(meta, n_reqs, cc);
    const int32_t *m = meta + r * SEL_META;
    const int blk = __ldg(cand + __ldg(m + M_CAND_SRC) + (cc - __ldg(m + M_CAND_OFF)));
    const int group = n_heads / nkv, n_q = __ldg(m + M_N_ROWS) * group;
    const int32_t *rr = rows + __ldg(m + M_ROW_OFF);
    /* copy slot k of this lane: candidate 8k + lane / 4 of the warp, piece lane % 4 (kmin, kmin,
     * kmax, kmax: two 16-byte pieces of each per stage) */
    unsigned unit[4];   /* (block, KV head) of each copy slot */
#pragma unroll
    for (int k = 0; k < 4; k++)
        unit[k] = (unsigned)__shfl_sync(0xffffffffu, blk, 8 * k + (lane >> 2)) * (unsigned)nkv + (unsigned)h;
    const okv_bf16 *src0 = summ + ((lane & 3) >= 2 ? hd : 0) + (lane & 1) * 8;
    const int n_st = hd >> 4;
    const uint4 *sp;
    auto issue = [&](int s) {
        uint4 *dst = s_piece[wi][s & 1] + (lane >> 2) * QC_PITCH + (lane & 3);
#pragma unroll
        for (int k = 0; k < 4; k++)
            __pipeline_memcpy_async(dst + 8 * k * QC_PITCH, src0 + (size_t)unit[k] * 2 * hd + 16 * s, 16);
        __pipeline_commit();
    };
    /* the queries: where the warp's lanes share one request (nearly always: a request has
     * hundreds of candidates), copied into shared memory once, else read from q (L1) */
    const int hd4 = hd >> 2;
    const float4 *q4 = (const float4 *)q;
    unsigned qo[QMAX];   /* the queries' float4 offsets in q4 */
    float sum[QMAX];
#pragma unroll
    for (int u = 0; u < QMAX; u++) {   /* a request of no rows reads none (its score stays -inf) */
        const int n = u < n_q ? u : 0;
        qo[u] = n_q ? (unsigned)(((size_t)__ldg(rr + n / group) * n_heads + (size_t)h * group + n % group) * hd4) : 0u;
        sum[u] = 0.f;
    }
    if (q_stride > 0 && __all_sync(0xffffffffu, r == __shfl_sync(0xffffffffu, r, 0))) {
        float4 *dst = s_q + (size_t)wi * q_stride;
        for (int i = lane; i < n_q * hd4; i += 32) {
            const int n = i / hd4;
            dst[i] = __ldg(q4 + ((size_t)__ldg(rr + n / group) * n_heads + (size_t)h * group + n % group) * hd4 + i % hd4);
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < QMAX; u++)
            qo[u] = (unsigned)(u < n_q ? u : 0) * (unsigned)hd4;
        q4 = dst;
    }
    issue(0);
    if (n_st > 1)
        issue(1);
    for (int s = 0; s < n_st; s++) {
        if (s + 1 < n_st)
            __pipeline_wait_prior(1);
        else
            __pipeline_wait_prior(0);
        __syncwarp();
        sp = s_piece[wi][s & 1] + lane * QC_PITCH;
        const uint4 a0 = sp[0], a1 = sp[1], b0 = sp[2], b1 = sp[3];
        __syncwarp();   /* every lane has its pieces before the buffer is refilled */
        if (s + 2 < n_st)
            issue(s + 2);
        const unsigned av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const unsigned bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int u = 0; u < QMAX; u++) {
            if (u >= n_q)
                break;
#pragma unroll
            for (int x = 0; x < 4; x++) {   /* channels 16 s + 4 x .. + 3: words 2 x, 2 x + 1 */
                const float4 qv = q4[qo[u] + 4 * s + x];   /* generic: shared memory or q */
                const float qq[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const unsigned wa = av[2 * x + (e >> 1)], wb = bv[2 * x + (e >> 1)];
                    const float lo = __uint_as_float(e & 1 ? wa & 0xffff0000u : wa << 16);
                    const float hi = __uint_as_float(e & 1 ? wb & 0xffff0000u : wb << 16);
                    sum[u] = __fadd_rn(sum[u], fmaxf(__fmul_rn(qq[e], lo), __fmul_rn(qq[e], hi)));
                }
            }
        }
    }
    float best = -INFINITY;
#pragma unroll
    for (int u = 0; u < QMAX; u++)
        if (u < n_q)
            best = fmaxf(best, sum[u]);
    if (live)
        scores[(size_t)__ldg(m + M_SC_OFF) + (size_t)h * __ldg(m + M_N_CAND) + (cc - __ldg(m + M_CAND_OFF))] = best;
}

/* With key codes (backend.h): one warp per (candidate, KV head) scores the block by
 * max over its keys t and the queries of q.kmin + s * sum_d iw_d c_td, where w_d =
 * (q_d / L) (kmax_d - kmin_d) is rounded to int8 steps of s = max_d |w_d| / 127 (backend.h:
 * the CPU backend computes the same integers; __fmul_rn keeps the products unfused as there).
 * The codes are copied into shared memory asynchronously first, so that HBM's latency passes
 * while the weights are staged. Staging: a 32-bit word of codes, shifted right by j*B and
 * masked, holds in its four bytes the codes of channels j, j + 8/B, j + 16/B, j + 24/B of the
 * word; each lane builds the int8 weights of such a four-channel set, packed in one int, for
 * CODE_QG queries at once (independent shuffle chains), with q.kmin and s. Scoring: lane
 * (j0, t) takes key t and queries j0, j0 + 32/bs, ... (bs <= 32 dividing 32; tokens loop
 * otherwise), holds the key's codes in registers and sums with __dp4a, 4 products an
 * instruction. Keys whose codes are not whole 16-byte pieces take a word or byte loop. With
 * blend b > 0 (backend.h) the staged q.kmin and s become those of (1 - b) max + b bound. */
#define CODE_WARPS 4
#define CODE_IW_MAX 512    /* packed weights (ints) staged per warp */
#define CODE_SM_U4 128     /* codes staged per warp, 16-byte pieces: 2 KiB (16 tokens x hd 128 x 4 bits, or 256 x 2) */
#define CODE_QG 4          /* queries staged together */
template <int BITS, int IPL /* packed ints a lane stages: head_dim <= 128 * IPL */>
static __global__ void __launch_bounds__(CODE_WARPS * 32, IPL == 1 ? 8 : 5)
codes_k(const float *q, const okv_bf16 *summ, const uint8_t *codes, const int32_t *meta, int n_reqs, const int32_t *rows,
        const int32_t *cand, int total_cand, int n_heads, int nkv, int hd, int bs, int code_bytes, float blend, float *scores)
{
    __shared__ int s_iw[CODE_WARPS][CODE_IW_MAX];
    __shared__ uint4 s_codes[CODE_WARPS][CODE_SM_U4];
    __shared__ float s_base[CODE_WARPS][32], s_scale[CODE_WARPS][32];
    constexpr int PER = 8 / BITS, CPW = 32 / BITS;   /* channels a byte, a word */
    constexpr unsigned MASK = BITS == 1 ? 0x01010101u : BITS == 2 ? 0x03030303u : 0x0f0f0f0fu;
    constexpr int TQ = IPL * BITS;                   /* 16-byte pieces of one key's codes at most */
    const int wi = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int w = blockIdx.x * CODE_WARPS + wi;
    if (w >= total_cand * nkv)
        return;   /* whole warps only: no block-wide barrier below */
    const int gc = w / nkv, h = w % nkv;
    const int r = request_of(meta, n_reqs, gc);
    const int32_t *m = meta + r * SEL_META;
    const int blk = __ldg(cand + __ldg(m + M_CAND_SRC) + (gc - __ldg(m + M_CAND_OFF)));
    const uint8_t *cb = codes + ((size_t)blk * nkv + h) * code_bytes;
    const int n16 = code_bytes >> 4;
    const bool staged = (code_bytes & 15) == 0 && n16 <= CODE_SM_U4;
    if (staged) {
        for (int i = lane; i < n16; i += 32)
            __pipeline_memcpy_async(&s_codes[wi][i], (const uint4 *)cb + i, 16);
        __pipeline_commit();
    }
    const okv_bf16 *kmin = summ + ((size_t)blk * nkv + h) * 2 * hd, *kmax = kmin + hd;
    const int group = n_heads / nkv, n_q = __ldg(m + M_N_ROWS) * group;
    const int32_t *rr = rows + __ldg(m + M_ROW_OFF);
    const float inv_top = 1.f / (float)((1 << BITS) - 1);
    const int n_words = (hd + CPW - 1) / CPW, n_ints = n_words * PER, tok_bytes = hd * BITS / 8;
    const int stride = ((n_ints + 3) & ~3) + 4;   /* ints a query, padded by 4: aligned, other banks */
    const int qc = min(32, CODE_IW_MAX / stride);
    int *iw = s_iw[wi];
    /* this lane's packed ints P = lane + 32 i: channels (P / PER) * CPW + k * PER + P % PER, k < 4 */
    float lo[IPL][4], sp[IPL][4];
    int dch[IPL][4];
#pragma unroll
    for (int i = 0; i < IPL; i++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int P = lane + 32 * i, d = (P / PER) * CPW + k * PER + P % PER;
            const bool ok = P < n_ints && d < hd;
            dch[i][k] = ok ? d : -1;
            lo[i][k] = ok ? __bfloat162float(kmin[d]) : 0.f;
            sp[i][k] = ok ? __bfloat162float(kmax[d]) - lo[i][k] : 0.f;
        }
    /* scoring lanes: key t0 (+ tpl ...), queries j0 (+ qpl ...) */
    const int tpl = bs < 32 ? bs : 32, qpl = 32 / tpl;
    const int t0 = lane % tpl, j0 = lane / tpl;
    const bool quads = (tok_bytes & 15) == 0 && tok_bytes / 16 <= TQ, words = (tok_bytes & 3) == 0;
    const uint8_t *cs = staged ? (const uint8_t *)s_codes[wi] : cb;
    float best = -INFINITY;
    int cur_r = 0, cur_g = 0;
    for (int q0 = 0; q0 < n_q; q0 += qc) {
        const int nq = min(qc, n_q - q0);
        for (int g0 = 0; g0 < nq; g0 += CODE_QG) {
            float part[CODE_QG], mx[CODE_QG], pos[CODE_QG], wv[CODE_QG][IPL][4];
#pragma unroll
            for (int u = 0; u < CODE_QG; u++) {
                /* query q0 + g0 + u is (row cur_r, head cur_g of the group): counted, not divided */
                const bool live = g0 + u < nq;
                const float *qv = q + ((size_t)__ldg(rr + (live ? cur_r : 0)) * n_heads + (size_t)h * group + (live ? cur_g : 0)) * hd;
                if (live && ++cur_g == group) {
                    cur_g = 0;
                    cur_r++;
                }
                part[u] = mx[u] = pos[u] = 0.f;
#pragma unroll
                for (int i = 0; i < IPL; i++)
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const float qd = dch[i][k] >= 0 ? __ldg(qv + dch[i][k]) : 0.f;
                        part[u] += qd * lo[i][k];
                        wv[u][i][k] = sp[i][k] > 0.f ? __fmul_rn(__fmul_rn(qd, inv_top), sp[i][k]) : 0.f;
                        mx[u] = fmaxf(mx[u], fabsf(wv[u][i][k]));
                        pos[u] += fmaxf(wv[u][i][k], 0.f);
                    }
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                for (int u = 0; u < CODE_QG; u++) {
                    part[u] += __shfl_xor_sync(0xffffffffu, part[u], o);
                    mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], o));
                }
            if (blend > 0.f)   /* blended with Quest's bound q.kmin + L sum_d max(w_d, 0) (backend.h) */
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                    for (int u = 0; u < CODE_QG; u++)
                        pos[u] += __shfl_xor_sync(0xffffffffu, pos[u], o);
#pragma unroll
            for (int u = 0; u < CODE_QG; u++) {
                if (g0 + u >= nq)
                    break;
                const float rs = mx[u] > 0.f ? 127.f / mx[u] : 0.f;
#pragma unroll
                for (int i = 0; i < IPL; i++) {
                    unsigned packed = 0;
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        int v = (int)rintf(__fmul_rn(wv[u][i][k], rs));
                        v = v < -127 ? -127 : v > 127 ? 127 : v;
                        packed |= ((unsigned)v & 0xffu) << (8 * k);
                    }
                    if (lane + 32 * i < n_ints)
                        iw[(g0 + u) * stride + lane + 32 * i] = (int)packed;
                }
                if (lane == 0) {
                    s_base[wi][g0 + u] = blend > 0.f ? fmaf(blend, (float)((1 << BITS) - 1) * pos[u], part[u]) : part[u];
                    s_scale[wi][g0 + u] = blend > 0.f ? (1.f - blend) * (mx[u] / 127.f) : mx[u] / 127.f;
                }
            }
        }
        if (q0 == 0 && staged)
            __pipeline_wait_prior(0);
        __syncwarp();
        if (j0 < qpl)
            for (int t = t0; t < bs; t += tpl) {
                const uint8_t *tc = cs + (size_t)t * tok_bytes;
                if (quads) {
                    uint4 kc[TQ];   /* the key's codes, read once for all its queries */
#pragma unroll
                    for (int y = 0; y < TQ; y++)
                        if (y < tok_bytes / 16)
                            kc[y] = *(const uint4 *)(tc + 16 * y);
                    for (int j = j0; j < nq; j += qpl) {
                        const int4 *wq = (const int4 *)(iw + j * stride);
                        int acc = 0;
#pragma unroll
                        for (int y = 0; y < TQ; y++) {
                            if (y >= tok_bytes / 16)
                                break;
                            const unsigned vv[4] = {kc[y].x, kc[y].y, kc[y].z, kc[y].w};
#pragma unroll
                            for (int z = 0; z < PER; z++) {   /* ints 4 PER y + 4 z ...: words 4y + (4z + e) / PER */
                                const int4 w4 = wq[PER * y + z];
                                const int ww[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
                                for (int e = 0; e < 4; e++) {
                                    const int kk = 4 * z + e;
                                    acc = __dp4a((int)((vv[kk / PER] >> ((kk % PER) * BITS)) & MASK), ww[e], acc);
                                }
                            }
                        }
                        best = fmaxf(best, fmaf(s_scale[wi][j], (float)acc, s_base[wi][j]));
                    }
                } else {
                    for (int j = j0; j < nq; j += qpl) {
                        const int *iwj = iw + j * stride;
                        int acc = 0;
                        if (words) {
                            for (int x = 0; x < n_words; x++) {
                                const unsigned v = *(const uint32_t *)(tc + 4 * x);
#pragma unroll
                                for (int jj = 0; jj < PER; jj++)
                                    acc = __dp4a((int)((v >> (jj * BITS)) & MASK), iwj[x * PER + jj], acc);
                            }
                        } else {
                            const int8_t *w8 = (const int8_t *)iwj;
                            for (int d = 0; d < hd; d++) {
                                const size_t bit = ((size_t)t * hd + d) * BITS;
                                const int e = d % CPW;
                                acc += (int)((cs[bit / 8] >> (bit % 8)) & ((1u << BITS) - 1)) *
                                       (int)w8[((d / CPW) * PER + e % PER) * 4 + e / PER];
                            }
                        }
                        best = fmaxf(best, fmaf(s_scale[wi][j], (float)acc, s_base[wi][j]));
                    }
                }
            }
        __syncwarp();
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, o));
    if (lane == 0)
        scores[(size_t)__ldg(m + M_SC_OFF) + (size_t)h * __ldg(m + M_N_CAND) + (gc - __ldg(m + M_CAND_OFF))] = best;
}

/* The same score with tensor cores (codes_mma_k; the default where the shape allows, see
 * codes_mma_fits): one warp scores MC_CPW consecutive candidates of one KV head, the next
 * candidate's summaries and codes copied into shared memory (cp.async) while the current one is
 * scored. Keys (16-token m-tiles) times queries (8-query n-tiles) is a product of 8-bit integers,
 * mma m16n8k32: the codes are the A operand (one code a byte), the int8 weights the B operand.
 * A thread t (of g = lane / 4, t = lane % 4) of the mma owns channels 32t .. 32t + 31, whole
 * words of a key's codes; its "pair" i < 8 is word i / PER of them shifted right by (i % PER) B
 * and masked: four codes, one a byte, of the word's channels k PER + i % PER (k < 4); pairs 2kt
 * and 2kt + 1 are its A columns 4t.. and 16 + 4t.. of k-tile kt, and its B rows the same
 * channels' weights. The weights are built without idle lanes: eight lanes a query, four
 * queries at a time, lane s of a query computing the 16 weights of pairs 4s .. 4s + 3 (the same
 * float steps as codes_k and the CPU; max |w|, q.kmin and sum max(w, 0) reduced over the eight)
 * and storing them as the B rows' words 4s.. of that query in shared memory, from where each
 * mma thread reads its two words a k-tile. The integers are exact, so the scores are codes_k's.
 * Needs hd <= 128, hd % 16 == 0, hd B % 32 == 0 (whole words a key), codes of a (block, head)
 * in 16-byte pieces, bs <= 64. */
#define MC_WARPS 4
#define MC_CPW 8           /* candidates a warp */
#define MC_WQ 36           /* words of one query's staged weights: 32, padded against bank conflicts */
static bool codes_mma_fits(int hd, int bits, int bs, int code_bytes)
{
    return hd <= 128 && hd % 16 == 0 && (hd * bits) % 32 == 0 && code_bytes % 16 == 0 && bs <= 64;
}
extern "C" bool okv_cuda_codes_mma_fits(const struct okv_kv_geometry *g)
{
    return g->key_code_bits > 0 && codes_mma_fits(g->head_dim, g->key_code_bits, g->block_size, (int)okv_key_code_bytes(g));
}
/* per warp: two staging buffers (summaries, codes), then 8 queries' weights, bases and scales */
static size_t codes_mma_smem(int hd, int code_bytes)
{
    return (size_t)MC_WARPS * (2 * (size_t)(hd * 4 + code_bytes) + 8 * MC_WQ * 4 + 16 * 4);
}

/* Lane s of a query group builds pairs 4s .. 4s + 3: channel of its weight (a, k) (pair 4s + a,
 * byte k) is cbase(s) + coff(a, k); its 16 channels are loaded as 4 runs of 4 (run k / 4 of
 * ld_pos) */
template <int BITS> static __device__ __forceinline__ int cbase(int s) { return BITS == 1 ? 32 * (s >> 1) + 4 * (s & 1) : 16 * s; }
template <int BITS> static __host__ __device__ constexpr int coff(int a, int k)
{
    return BITS == 1 ? 8 * k + a : BITS == 2 ? 4 * k + a : 8 * (a >> 1) + 2 * k + (a & 1);
}
/* runs: channels cbase + 8r .. + 3 (1 bit), cbase + 4r .. + 3 (2, 4 bits) */
template <int BITS> static __host__ __device__ constexpr int run_at(int r) { return BITS == 1 ? 8 * r : 4 * r; }
template <int BITS> static __host__ __device__ constexpr int ld_pos(int a, int k)
{
    return (coff<BITS>(a, k) / run_at<BITS>(1)) * 4 + coff<BITS>(a, k) % run_at<BITS>(1);
}

template <int BITS>
static __global__ void __launch_bounds__(MC_WARPS * 32)
codes_mma_k(const float *q, const okv_bf16 *summ, const uint8_t *codes, const int32_t *meta, int n_reqs, const int32_t *rows,
            const int32_t *cand, int total_cand, int n_heads, int nkv, int hd, int bs, int code_bytes, float blend,
            float *scores)
{
    extern __shared__ uint4 mc_smem[];
    constexpr int PER = 8 / BITS;   /* codes a byte */
    constexpr unsigned MASK = BITS == 1 ? 0x01010101u : BITS == 2 ? 0x03030303u : 0x0f0f0f0fu;
    const int wi = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, h = blockIdx.y;
    const int qs = lane >> 3, s = lane & 7;   /* weight building: query slot, lane of the query */
    const int c0 = (blockIdx.x * MC_WARPS + wi) * MC_CPW;
    if (c0 >= total_cand)
        return;   /* whole warps only: no block-wide barrier below */
    const int nc = min(MC_CPW, total_cand - c0);
    const int summ_u4 = hd >> 2, buf_u4 = summ_u4 + (code_bytes >> 4);   /* kmin, kmax (bf16), then the codes */
    uint4 *buf = mc_smem + (size_t)wi * (2 * buf_u4 + (8 * MC_WQ * 4 + 16 * 4) / 16);
    uint32_t *wq = (uint32_t *)(buf + 2 * buf_u4);   /* [8][MC_WQ] weights, then bases [8], scales [8] */
    float *s_base = (float *)(wq + 8 * MC_WQ), *s_scale = s_base + 8;
    int r = request_of(meta, n_reqs, c0);
    const int my_blk = lane_block(meta, n_reqs, cand, r, c0, nc, lane);
    const int group = n_heads / nkv, tok_w = hd * BITS / 32;   /* words of a key's codes */
    const float inv_top = 1.f / (float)((1 << BITS) - 1);
    const int cb = cbase<BITS>(s);
    const bool lane_ch = cb < hd, mine = 32 * t < hd;   /* channels of weight lanes (runs) and of mma threads */
    float qv[16], ql[16];
    int q_of = -1;   /* the request whose query qs the registers hold (requests of at most 4 queries) */
    for (int j = 0; j <= nc; j++) {
        if (j < nc) {   /* stage candidate j (one ahead of the one scored) */
            const int blk = __shfl_sync(0xffffffffu, my_blk, j);
            uint4 *b = buf + (j & 1) * buf_u4;
            const uint4 *sg = (const uint4 *)(summ + ((size_t)blk * nkv + h) * 2 * hd);
            const uint4 *cg = (const uint4 *)(codes + ((size_t)blk * nkv + h) * code_bytes);
            for (int i = lane; i < buf_u4; i += 32)
                cp_async16(b + i, i < summ_u4 ? sg + i : cg + (i - summ_u4), 16);
        }
        cp_async_commit();
        if (j == 0)
            continue;
        cp_async_wait<1>();
        __syncwarp();
        const int jc = j - 1, gc = c0 + jc;
        while (r + 1 < n_reqs && __ldg(meta + (r + 1) * SEL_META + M_CAND_OFF) <= gc)
            r++;
        const int32_t *m = meta + r * SEL_META;
        const int n_q = __ldg(m + M_N_ROWS) * group;
        const int32_t *rr = rows + __ldg(m + M_ROW_OFF);
        const uint4 *b = buf + (jc & 1) * buf_u4;
        const uint32_t *cw = (const uint32_t *)(b + summ_u4);
        /* this lane's 16 channels: kmin and the span, in load order */
        float lo[16], sp[16];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int ch = cb + run_at<BITS>(u);
            const uint2 l2 = lane_ch ? *(const uint2 *)((const okv_bf16 *)b + ch) : make_uint2(0, 0);
            const uint2 h2 = lane_ch ? *(const uint2 *)((const okv_bf16 *)b + hd + ch) : make_uint2(0, 0);
            const float4 lf = bf4_to_f4(l2), hf = bf4_to_f4(h2);
            lo[4 * u] = lf.x, lo[4 * u + 1] = lf.y, lo[4 * u + 2] = lf.z, lo[4 * u + 3] = lf.w;
            sp[4 * u] = __fsub_rn(hf.x, lf.x), sp[4 * u + 1] = __fsub_rn(hf.y, lf.y);
            sp[4 * u + 2] = __fsub_rn(hf.z, lf.z), sp[4 * u + 3] = __fsub_rn(hf.w, lf.w);
        }
        float best = -INFINITY;
        for (int nt = 0; nt * 8 < n_q; nt++) {
            /* the weights of queries nt 8 .. nt 8 + 7, four at a time */
            for (int half = 0; half < 2 && nt * 8 + half * 4 < n_q; half++) {
                const int n = nt * 8 + half * 4 + qs;
                if (n_q > 4 || q_of != r) {   /* query n: row n / group, head h group + n % group */
                    const bool ok = n < n_q && lane_ch;
                    const float *qp = q + ((size_t)__ldg(rr + (n < n_q ? n / group : 0)) * n_heads + (size_t)h * group +
                                           (n < n_q ? n % group : 0)) * hd + cb;
#pragma unroll
                    for (int u = 0; u < 4; u++) {
                        const float4 v = ok ? __ldg((const float4 *)(qp + run_at<BITS>(u))) : make_float4(0.f, 0.f, 0.f, 0.f);
                        qv[4 * u] = v.x, qv[4 * u + 1] = v.y, qv[4 * u + 2] = v.z, qv[4 * u + 3] = v.w;
                    }
#pragma unroll
                    for (int e = 0; e < 16; e++)
                        ql[e] = __fmul_rn(qv[e], inv_top);
                    q_of = n_q <= 4 ? r : -1;
                }
                float w[16], part = 0.f, mx = 0.f, pos = 0.f;
#pragma unroll
                for (int e = 0; e < 16; e++) {
                    part = fmaf(qv[e], lo[e], part);
                    w[e] = __fmul_rn(ql[e], sp[e]);
                    mx = fmaxf(mx, fabsf(w[e]));
                    pos += fmaxf(w[e], 0.f);
                }
#pragma unroll
                for (int o = 1; o < 8; o <<= 1) {
                    part += __shfl_xor_sync(0xffffffffu, part, o);
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                    pos += __shfl_xor_sync(0xffffffffu, pos, o);
                }
                const float rs = mx > 0.f ? __fdiv_rn(127.f, mx) : 0.f;
                /* round(w rs) by the 1.5 * 2^23 trick (|w rs| <= 127: the integer is the low byte) */
                uint4 pk;
                uint32_t *pw = &pk.x;
#pragma unroll
                for (int a = 0; a < 4; a++) {
                    int v[4];
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        v[k] = __float_as_int(__fadd_rn(__fmul_rn(w[ld_pos<BITS>(a, k)], rs), 12582912.f));
                    pw[a] = __byte_perm(__byte_perm(v[0], v[1], 0x0040), __byte_perm(v[2], v[3], 0x0040), 0x5410);
                }
                *(uint4 *)(wq + (half * 4 + qs) * MC_WQ + 4 * s) = pk;
                if (s == 0) {
                    s_base[half * 4 + qs] = blend > 0.f ? fmaf(blend, (float)((1 << BITS) - 1) * pos, part) : part;
                    s_scale[half * 4 + qs] = blend > 0.f ? (1.f - blend) * __fdiv_rn(mx, 127.f) : __fdiv_rn(mx, 127.f);
                }
            }
            __syncwarp();
            /* the epilogue's queries: 2t and 2t + 1 of the n-tile */
            const bool ok0 = nt * 8 + 2 * t < n_q, ok1 = nt * 8 + 2 * t + 1 < n_q;
            const float base0 = s_base[2 * t], scale0 = s_scale[2 * t], base1 = s_base[2 * t + 1], scale1 = s_scale[2 * t + 1];
            uint2 bw[4];
#pragma unroll
            for (int kt = 0; kt < 4; kt++)
                bw[kt] = *(const uint2 *)(wq + g * MC_WQ + 8 * t + 2 * kt);
            for (int t0 = 0; t0 < bs; t0 += 16) {
                const int ra = t0 + g, rb = ra + 8;
                uint32_t wa[BITS], wb[BITS];
#pragma unroll
                for (int x = 0; x < BITS; x++) {
                    const bool okx = mine && t * BITS + x < tok_w;
                    wa[x] = okx && ra < bs ? cw[ra * tok_w + t * BITS + x] : 0u;
                    wb[x] = okx && rb < bs ? cw[rb * tok_w + t * BITS + x] : 0u;
                }
                int acc[4] = {0, 0, 0, 0};
#pragma unroll
                for (int kt = 0; kt < 4; kt++) {
                    const int i0 = 2 * kt, i1 = 2 * kt + 1;
                    const uint32_t a[4] = {(wa[i0 / PER] >> ((i0 % PER) * BITS)) & MASK, (wb[i0 / PER] >> ((i0 % PER) * BITS)) & MASK,
                                           (wa[i1 / PER] >> ((i1 % PER) * BITS)) & MASK, (wb[i1 / PER] >> ((i1 % PER) * BITS)) & MASK};
                    mma_s8(acc, a, bw[kt].x, bw[kt].y);
                }
                /* base + scale acc, fused as on the CPU backend */
                if (ra < bs) {
                    if (ok0)
                        best = fmaxf(best, fmaf(scale0, (float)acc[0], base0));
                    if (ok1)
                        best = fmaxf(best, fmaf(scale1, (float)acc[1], base1));
                }
                if (rb < bs) {
                    if (ok0)
                        best = fmaxf(best, fmaf(scale0, (float)acc[2], base0));
                    if (ok1)
                        best = fmaxf(best, fmaf(scale1, (float)acc[3], base1));
                }
            }
            __syncwarp();   /* the next n-tile's weights overwrite these */
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, o));
        if (lane == 0)
            scores[(size_t)__ldg(m + M_SC_OFF) + (size_t)h * __ldg(m + M_N_CAND) + (gc - __ldg(m + M_CAND_OFF))] = best;
        __syncwarp();   /* the buffer is staged again two candidates on */
    }
}

/* Diagnostics (OKV_SELECT_SCORE=exact or codesB, as on the CPU backend, cpu_select.c): one
 * warp per (candidate, KV head) reads the block's keys from the mapped host tier and scores
 * it by the exact max of q.k over them, or with each channel first rounded to one of 2^bits
 * levels of the summary's [kmin, kmax]. Slow (PCIe reads of every candidate): for accuracy
 * studies, never for serving. */
static __global__ void diag_score_k(const float *q, const okv_bf16 *summ, const okv_bf16 *hostk, const uint8_t *hostk8,
                                    const int32_t *meta,
                                    int n_reqs, const int32_t *rows, const int32_t *cand, int total_cand, int n_heads,
                                    int nkv, int hd, int bs, int bits, float *scores)
{
    const int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (w >= total_cand * nkv)
        return;
    const int gc = w / nkv, h = w % nkv;
    int r = 0;
    while (r + 1 < n_reqs && __ldg(meta + (r + 1) * SEL_META + M_CAND_OFF) <= gc)
        r++;
    const int32_t *m = meta + r * SEL_META;
    const int blk = __ldg(cand + __ldg(m + M_CAND_SRC) + (gc - __ldg(m + M_CAND_OFF)));
    const size_t k0 = ((size_t)blk * nkv + h) * 2 * (size_t)bs * hd;   /* the unit's keys (bf16 or fp8 host tier) */
    const okv_bf16 *kmin = summ + ((size_t)blk * nkv + h) * 2 * hd, *kmax = kmin + hd;
    const float levels = (float)((1 << bits) - 1);
    const int n_rows = __ldg(m + M_N_ROWS), group = n_heads / nkv;
    const int32_t *rr = rows + __ldg(m + M_ROW_OFF);
    float best = -INFINITY;
    for (int ri = 0; ri < n_rows; ri++)
        for (int g = 0; g < group; g++) {
            const float *qv = q + ((size_t)__ldg(rr + ri) * n_heads + (size_t)h * group + g) * hd;
            for (int t = 0; t < bs; t++) {
                float sum = 0.f;
                for (int d = lane; d < hd; d += 32) {
                    const size_t ki = k0 + (size_t)t * hd + d;
                    float kd = __bfloat162float(hostk8 ? e4m3_dec(hostk8[ki]) : hostk[ki]);
                    if (bits > 0) {
                        const float lo = __bfloat162float(kmin[d]), span = __bfloat162float(kmax[d]) - lo;
                        const float code = span > 0.f ? rintf((kd - lo) / span * levels) : 0.f;
                        kd = lo + code / levels * span;
                    }
                    sum += qv[d] * kd;
                }
                for (int o = 16; o > 0; o >>= 1)
                    sum += __shfl_xor_sync(0xffffffffu, sum, o);
                best = fmaxf(best, sum);
            }
        }
    if (lane == 0)
        scores[(size_t)__ldg(m + M_SC_OFF) + (size_t)h * __ldg(m + M_N_CAND) + (gc - __ldg(m + M_CAND_OFF))] = best;
}

/* the OKV_SELECT_SCORE diagnostic asked for: -1 none (the bound), else the code bits (0: exact) */
/* OKV_CODES_MMA=0, OKV_QUEST_LANE=0: the kernel a default replaced (A/B, tests switch them) */
static bool env_off(const char *name)
{
    const char *e = getenv(name);
    return e && !strcmp(e, "0");
}

static int diag_bits(void)
{
    const char *e = getenv("OKV_SELECT_SCORE");
    if (!e)
        return -1;
    if (!strcmp(e, "exact"))
        return 0;
    if (!strncmp(e, "codes", 5)) {
        const int b = atoi(e + 5);
        return b < 1 ? 1 : b > 4 ? 4 : b;
    }
    return -1;
}

static __device__ __forceinline__ unsigned long long sort_key(float f, int32_t id)
{
    const unsigned u = __float_as_uint(f);
    const unsigned asc = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   /* ascending order of floats */
    return ((unsigned long long)(~asc) << 32) | (unsigned)id;          /* score descending, id ascending */
}


static __device__ __forceinline__ unsigned long long seg_key(const unsigned long long *keys, const float *sc, const int32_t *cd,
                                                             int i)
{
    return keys ? keys[i] : sort_key(sc[i], cd[i]);
}

static __global__ void __launch_bounds__(SEL_TOPK_THREADS)
topk_k(const float *scores, const int32_t *meta, const int32_t *cand, int nkv, int32_t *ids)
{
    extern __shared__ unsigned long long sm[];
    __shared__ unsigned hist[256];
    __shared__ unsigned s_bin, s_before, s_cnt, s_taken, s_eq;
    const int r = blockIdx.x / nkv, h = blockIdx.x % nkv, tid = threadIdx.x, lane = tid & 31;
    const int32_t *m = meta + r * SEL_META;
    const int n = m[M_N_CAND], k = m[M_K];
    if (k == 0 || k > SEL_SORT_MAX)
        return;
    const float *sc = scores + m[M_SC_OFF] + (size_t)h * n;
    const int32_t *cd = cand + m[M_CAND_SRC];
    int32_t *out = ids + m[M_OUT_OFF] + (size_t)h * k;
    int kp = 1;
    while (kp < k)
        kp <<= 1;
    if (k == n) {   /* every candidate: sort them all */
        for (int i = tid; i < kp; i += blockDim.x)
            sm[i] = i < n ? sort_key(sc[i], cd[i]) : ~0ull;
        okv_bitonic_sort_u64(sm, kp);
        for (int i = tid; i < k; i += blockDim.x)
            out[i] = (int32_t)(sm[i] & 0xffffffffu);
        return;
    }
    const unsigned long long *keys = NULL;
    unsigned long long *sel = sm;
    if (n <= SEL_STAGE_MAX) {
        for (int i = tid; i < n; i += blockDim.x)
            sm[i] = sort_key(sc[i], cd[i]);
        keys = sm;
        sel = sm + n;
    }
    /* radix select of the k-th smallest key: after each digit, the keys whose masked
     * bits are below prefix are taken; stop once the whole bin of the digit is taken */
    unsigned long long prefix = 0, mask = 0;
    unsigned kk = (unsigned)k;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += blockDim.x)
            hist[i] = 0;
        __syncthreads();
        for (int base = 0; base < n; base += blockDim.x) {
            const int i = base + tid;
            bool act = false;
            unsigned bin = 0;
            if (i < n) {
                const unsigned long long key = seg_key(keys, sc, cd, i);
                act = (key & mask) == prefix;
                bin = (unsigned)(key >> shift) & 255u;
            }
            const unsigned am = __ballot_sync(0xffffffffu, act);
            if (act) {   /* one atomic per distinct bin of the warp: scores share their top bits */
                const unsigned peers = __match_any_sync(am, bin);
                if (lane == __ffs(peers) - 1)
                    atomicAdd(&hist[bin], (unsigned)__popc(peers));
            }
        }
        __syncthreads();
        if (tid < 32) {
            unsigned v[8], sum = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                v[j] = hist[lane * 8 + j];
                sum += v[j];
            }
            unsigned incl = sum;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned t = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o)
                    incl += t;
            }
            const unsigned ball = __ballot_sync(0xffffffffu, incl >= kk);
            if (lane == (ball ? __ffs(ball) - 1 : 31)) {
                unsigned cum = incl - sum, jb = 7, cnt = v[7];
                bool found = false;
#pragma unroll
                for (int j = 0; j < 8; j++) {   /* constant indices: v stays in registers */
                    if (!found && (j == 7 || cum + v[j] >= kk)) {
                        jb = j;
                        cnt = v[j];
                        found = true;
                    } else if (!found) {
                        cum += v[j];
                    }
                }
                s_bin = lane * 8 + jb;
                s_before = cum;
                s_cnt = cnt;
            }
        }
        __syncthreads();
        kk -= s_before;
        prefix |= (unsigned long long)s_bin << shift;
        mask |= 0xffull << shift;
        if (s_cnt == kk)
            break;
    }
    /* take the k - kk keys below the prefix and kk of those equal to it (more than kk
     * only with repeated candidates, whose keys are equal): positions [0, k-kk) and
     * [k-kk, k) */
    if (tid == 0) {
        s_taken = 0;
        s_eq = 0;
    }
    __syncthreads();
    for (int base = 0; base < n; base += blockDim.x) {
        const int i = base + tid;
        unsigned long long key = 0;
        bool lt = false, eq = false;
        if (i < n) {
            key = seg_key(keys, sc, cd, i);
            lt = (key & mask) < prefix;
            eq = (key & mask) == prefix;
        }
        const unsigned bl = __ballot_sync(0xffffffffu, lt), be = __ballot_sync(0xffffffffu, eq);
        unsigned al = 0, ae = 0;
        if (lane == 0 && bl)
            al = atomicAdd(&s_taken, (unsigned)__popc(bl));
        if (lane == 0 && be)
            ae = atomicAdd(&s_eq, (unsigned)__popc(be));
        const unsigned below = (1u << lane) - 1;
        al = __shfl_sync(0xffffffffu, al, 0) + __popc(bl & below);
        ae = __shfl_sync(0xffffffffu, ae, 0) + __popc(be & below);
        if (lt)
            sel[al] = key;
        if (eq && ae < kk)
            sel[k - 1 - ae] = key;
    }
    for (int i = k + tid; i < kp; i += blockDim.x)
        sel[i] = ~0ull;
    okv_bitonic_sort_u64(sel, kp);
    for (int i = tid; i < k; i += blockDim.x)
        out[i] = (int32_t)(sel[i] & 0xffffffffu);
}

struct scored { float s; int32_t id; };

static int scored_cmp(const void *a, const void *b)
{
    const struct scored *x = (const struct scored *)a, *y = (const struct scored *)b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Requests with k > SEL_SORT_MAX: sort their scores on the host. */
static enum okv_status host_topk(const struct okv_select_req *reqs, int n_reqs, int nkv, const float *hsc, int32_t *out)
{
    size_t o = 0, s = 0;
    for (int r = 0; r < n_reqs; r++) {
        const struct okv_select_req *q = &reqs[r];
        if (q->k > SEL_SORT_MAX) {
            struct scored *sc = (struct scored *)okv_malloc(sizeof *sc * (size_t)q->n_cand, OKV_TAG_BACKEND);
            if (!sc)
                return okv_set_error(OKV_ERR_NO_MEMORY, "cuda select_blocks: out of host memory");
            for (int h = 0; h < nkv; h++) {
                for (int i = 0; i < q->n_cand; i++) {
                    sc[i].s = hsc[s + (size_t)h * q->n_cand + i];
                    sc[i].id = q->cand_host[i];
                }
                qsort(sc, (size_t)q->n_cand, sizeof *sc, scored_cmp);
                for (int i = 0; i < q->k; i++)
                    out[o + (size_t)h * q->k + i] = sc[i].id;
            }
            okv_free(sc);
        }
        o += (size_t)nkv * q->k;
        s += (size_t)nkv * q->n_cand;
    }
    return OKV_OK;
}

static size_t topk_smem(int n, int k)
{
    if (k == 0 || k > SEL_SORT_MAX)
        return 0;
    size_t kp = 1;
    while (kp < (size_t)k)
        kp <<= 1;
    if (k == n)
        return kp * sizeof(unsigned long long);
    return ((n <= SEL_STAGE_MAX ? (size_t)n : 0) + kp) * sizeof(unsigned long long);
}

static enum okv_status select_impl(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                   const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores, bool async,
                                   int32_t *dev_ids = NULL, const int32_t **dev_cand = NULL,
                                   const struct okv_cuda_cand_tab *tab = NULL, struct okv_cuda_blob *extra = NULL);

extern "C" enum okv_status okv_cuda_select_to_device(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q,
                                                     int n_heads, const struct okv_select_req *reqs, int n_reqs,
                                                     int32_t *d_ids, const int32_t **d_cand,
                                                     const struct okv_cuda_cand_tab *tab, struct okv_cuda_blob *extra)
{
    enum okv_status st = okv_cuda_select_wait(be);
    *d_cand = NULL;
    if (extra)
        extra->d = NULL;
    return st != OKV_OK ? st : select_impl(be, kv, layer, q, n_heads, reqs, n_reqs, NULL, NULL, false, d_ids, d_cand, tab, extra);
}

extern "C" enum okv_status okv_cuda_select_blocks(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                                  const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores)
{
    enum okv_status st = okv_cuda_select_wait(be);
    return st != OKV_OK ? st : select_impl(be, kv, layer, q, n_heads, reqs, n_reqs, out, scores, false);
}

extern "C" enum okv_status okv_cuda_select_blocks_async(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q,
                                                        int n_heads, const struct okv_select_req *reqs, int n_reqs, int32_t *out)
{
    enum okv_status st = okv_cuda_select_wait(be);
    return st != OKV_OK ? st : select_impl(be, kv, layer, q, n_heads, reqs, n_reqs, out, NULL, true);
}

extern "C" enum okv_status okv_cuda_select_wait(okv_backend *be)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    if (!c->sel_pending)
        return OKV_OK;
    c->sel_pending = false;
    OKV_CU_WAIT(c, cudaEventSynchronize(c->sel_ev), "wait for the selected ids");
    memcpy(c->sel_out, c->sel_h, sizeof(int32_t) * c->sel_n);
    return OKV_OK;
}

/* async: the ids go to the pinned c->sel_h behind an event, and okv_cuda_select_wait
 * hands them over; requests that need the host sort run synchronously */
static enum okv_status select_impl(okv_backend *be, const okv_bkv *kv, int layer, const okv_bmem *q, int n_heads,
                                   const struct okv_select_req *reqs, int n_reqs, int32_t *out, float *scores, bool async,
                                   int32_t *dev_ids, const int32_t **dev_cand, const struct okv_cuda_cand_tab *tab,
                                   struct okv_cuda_blob *extra)
{
    struct cuda_ctx *c = OKV_CUDA_CTX(be);
    const int hd = kv->g.head_dim, nkv = kv->g.n_kv_heads;
    if (!kv->summ || n_heads <= 0 || n_heads % nkv || layer < 0 || layer >= kv->g.n_layers || n_reqs < 0 ||
        (n_reqs > 0 && !reqs))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: no host tier, bad layer %d, %d heads or %d requests",
                             layer, n_heads, n_reqs);
    int64_t t_rows = 0, t_cand = 0, t_out = 0, t_sc = 0;
    size_t smem = 0;
    bool host_sort = false;
    int max_rows = 0;
    for (int r = 0; r < n_reqs; r++) {
        const struct okv_select_req *rq = &reqs[r];
        if (rq->n_cand < 0 || rq->k < 0 || rq->k > rq->n_cand || rq->n_rows < 0 || (rq->n_rows > 0 && !rq->rows) ||
            (rq->n_cand > 0 && !rq->cand_host))
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: request %d: bad request (k %d of %d candidates, %d rows)",
                                 r, rq->k, rq->n_cand, rq->n_rows);
        t_rows += rq->n_rows;
        t_cand += rq->n_cand;
        t_out += (int64_t)nkv * rq->k;
        t_sc += (int64_t)nkv * rq->n_cand;
        const size_t sm = topk_smem(rq->n_cand, rq->k);
        smem = sm > smem ? sm : smem;
        host_sort |= rq->k > SEL_SORT_MAX;
        max_rows = rq->n_rows > max_rows ? rq->n_rows : max_rows;
    }
    if (t_sc + t_rows + t_cand + (int64_t)SEL_META * n_reqs + t_out >= INT_MAX)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: %lld candidates in one call are too many",
                             (long long)t_cand);
    if (t_cand == 0)
        return OKV_OK;   /* every k is 0 */
    if (dev_ids && host_sort)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda select_blocks: k above %d cannot stay on the device", SEL_SORT_MAX);
    /* candidates already on the device (tab): not uploaded (nor checked: the table's
     * owner checked them when they entered it) */
    const int64_t t_cand_up = tab ? 0 : t_cand;
    const size_t n_meta = (size_t)SEL_META * n_reqs, n_req_up = n_meta + (size_t)t_rows + (size_t)t_cand_up;
    /* [requests | extra, 16-byte aligned | ids]: one upload covers the first two */
    const size_t x_off = (sizeof(int32_t) * n_req_up + 15) & ~(size_t)15, x_bytes = extra ? (extra->bytes + 15) & ~(size_t)15 : 0;
    const size_t n_up = (x_off + x_bytes) / sizeof(int32_t);
    void *hv = NULL, *dv = NULL;
    enum okv_status st = okv_cuda_ring_alloc(c, sizeof(int32_t) * (n_up + (size_t)t_out), &hv, &dv);
    if (st != OKV_OK)
        return st;
    if (extra && extra->bytes) {
        memcpy((char *)hv + x_off, extra->h, extra->bytes);
        extra->d = (const char *)dv + x_off;
    }
    int32_t *h_meta = (int32_t *)hv, *h_rows = h_meta + n_meta, *h_cand = h_rows + t_rows, *h_ids = (int32_t *)hv + n_up;
    const int32_t max_row = (int32_t)(q->n / ((size_t)n_heads * hd)), n_hb = kv->g.n_host_blocks;
    int32_t ro = 0, co = 0, oo = 0, so = 0;
    for (int r = 0; r < n_reqs; r++) {
        const struct okv_select_req *rq = &reqs[r];
        int32_t *mr = h_meta + (size_t)r * SEL_META;
        mr[M_ROW_OFF] = ro;
        mr[M_N_ROWS] = rq->n_rows;
        mr[M_CAND_OFF] = co;
        mr[M_N_CAND] = rq->n_cand;
        mr[M_K] = rq->k;
        mr[M_OUT_OFF] = oo;
        mr[M_SC_OFF] = so;
        mr[M_CAND_SRC] = tab ? tab->off[r] : co;
        bool bad = false;
        for (int i = 0; i < rq->n_rows; i++) {
            const int32_t v = rq->rows[i];
            bad |= (uint32_t)v >= (uint32_t)max_row;
            h_rows[ro + i] = v;
        }
        if (bad)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: request %d: a row is outside q (%d rows)", r, max_row);
        for (int i = 0; !tab && i < rq->n_cand; i++) {   /* copy and check in one sweep: the hot path */
            const int32_t v = rq->cand_host[i];
            bad |= (uint32_t)v >= (uint32_t)n_hb;
            h_cand[co + i] = v;
        }
        if (bad)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda select_blocks: request %d: a candidate is outside the %d host blocks",
                                 r, n_hb);
        ro += rq->n_rows;
        co += rq->n_cand;
        oo += nkv * rq->k;
        so += nkv * rq->n_cand;
    }
    OKV_CU(cudaMemcpyAsync(dv, hv, sizeof(int32_t) * n_up, cudaMemcpyHostToDevice, c->sel_stream), "select request upload");
    const int32_t *d_meta = (const int32_t *)dv, *d_rows = d_meta + n_meta, *d_cand = tab ? tab->d_tab : d_rows + t_rows;
    int32_t *d_ids = (int32_t *)dv + n_up;
    float *d_sc = NULL;
    if ((st = okv_cuda_scratch(c, (size_t)t_sc, &d_sc)) != OKV_OK)
        return st;
    const okv_bf16 *summ = kv->summ + (size_t)layer * kv->g.n_host_blocks * nkv * 2 * hd;
    const int per_cta = SEL_WARPS * SEL_CPW;
    dim3 grid((unsigned)((t_cand + per_cta - 1) / per_cta), (unsigned)nkv);
    const int dbits = diag_bits();
    if (dbits >= 0 && kv->host_d) {
        const int bs = kv->g.block_size;
        const size_t lo = (size_t)layer * kv->g.n_host_blocks * nkv * 2 * (size_t)bs * hd;   /* elements */
        const bool f8 = kv->g.host_fp8;
        const okv_bf16 *hostk = f8 ? NULL : (const okv_bf16 *)kv->host_d + lo;
        const uint8_t *hostk8 = f8 ? kv->host_d + lo : NULL;
        diag_score_k<<<(unsigned)((t_cand * nkv + 3) / 4), 128, 0, c->sel_stream>>>(q->d, summ, hostk, hostk8, d_meta, n_reqs, d_rows,
                                                                                 d_cand, (int)t_cand, n_heads, nkv, hd, bs,
                                                                                 dbits, d_sc);
    } else if (kv->codes) {
        const unsigned g = (unsigned)((t_cand * nkv + CODE_WARPS - 1) / CODE_WARPS);
        const int cbytes = (int)okv_key_code_bytes(&kv->g), bs = kv->g.block_size;
        const float blend = okv_key_code_blend();   /* (1 - b) codes + b Quest's bound (backend.h) */
        const uint8_t *lc = kv->codes + (size_t)layer * kv->g.n_host_blocks * nkv * cbytes;
        /* tensor cores where the shape allows; OKV_CODES_MMA=0 takes codes_k (A/B, tests) */
        const bool mma = codes_mma_fits(hd, kv->g.key_code_bits, bs, cbytes) && !env_off("OKV_CODES_MMA");
        const dim3 mg((unsigned)((t_cand + MC_WARPS * MC_CPW - 1) / (MC_WARPS * MC_CPW)), (unsigned)nkv);
        const size_t msm = codes_mma_smem(hd, cbytes);
#define CODES_LAUNCH(B)                                                                                                    \
    do {                                                                                                                   \
        if (mma)                                                                                                           \
            codes_mma_k<B><<<mg, MC_WARPS * 32, msm, c->sel_stream>>>(q->d, summ, lc, d_meta, n_reqs, d_rows, d_cand,      \
                                                                    (int)t_cand, n_heads, nkv, hd, bs, cbytes, blend, d_sc); \
        else if (hd <= 128)                                                                                                \
            codes_k<B, 1><<<g, CODE_WARPS * 32, 0, c->sel_stream>>>(q->d, summ, lc, d_meta, n_reqs, d_rows, d_cand,        \
                                                                   (int)t_cand, n_heads, nkv, hd, bs, cbytes, blend, d_sc); \
        else                                                                                                               \
            codes_k<B, 2><<<g, CODE_WARPS * 32, 0, c->sel_stream>>>(q->d, summ, lc, d_meta, n_reqs, d_rows, d_cand,        \
                                                                   (int)t_cand, n_heads, nkv, hd, bs, cbytes, blend, d_sc); \
    } while (0)
        if (kv->g.key_code_bits == 1)
            CODES_LAUNCH(1);
        else if (kv->g.key_code_bits == 2)
            CODES_LAUNCH(2);
        else
            CODES_LAUNCH(4);
#undef CODES_LAUNCH
    } else if (hd % 16 == 0 && max_rows * (n_heads / nkv) <= 8 && !env_off("OKV_QUEST_COOP")) {
        const dim3 cg((unsigned)((t_cand + QC_WARPS * 32 - 1) / (QC_WARPS * 32)), (unsigned)nkv);
        /* the queries staged in shared memory where they fit 24 KiB (OKV_QUEST_QSMEM=0: never) */
        int q_stride = max_rows * (n_heads / nkv) * hd / 4;
        if ((size_t)QC_WARPS * q_stride * 16 > 24 * 1024 || env_off("OKV_QUEST_QSMEM"))
            q_stride = 0;
        const size_t qsm = (size_t)QC_WARPS * q_stride * 16;
        if (max_rows * (n_heads / nkv) <= 4)
            quest_coop_k<4><<<cg, QC_WARPS * 32, qsm, c->sel_stream>>>(q->d, summ, d_meta, n_reqs, d_rows, d_cand, (int)t_cand,
                                                                    n_heads, nkv, hd, q_stride, d_sc);
        else
            quest_coop_k<8><<<cg, QC_WARPS * 32, qsm, c->sel_stream>>>(q->d, summ, d_meta, n_reqs, d_rows, d_cand, (int)t_cand,
                                                                    n_heads, nkv, hd, q_stride, d_sc);
    } else if (hd % 8 == 0 && !env_off("OKV_QUEST_LANE"))
        quest_lane_k<<<dim3((unsigned)((t_cand + QL_THREADS - 1) / QL_THREADS), (unsigned)nkv), QL_THREADS, 0, c->sel_stream>>>(
            q->d, summ, d_meta, n_reqs, d_rows, d_cand, (int)t_cand, n_heads, nkv, hd, d_sc);
    else if (hd <= 128)
        quest_k<1><<<grid, SEL_WARPS * 32, 0, c->sel_stream>>>(q->d, summ, d_meta, n_reqs, d_rows, d_cand, (int)t_cand, n_heads,
                                                           nkv, hd, d_sc);
    else
        quest_k<2><<<grid, SEL_WARPS * 32, 0, c->sel_stream>>>(q->d, summ, d_meta, n_reqs, d_rows, d_cand, (int)t_cand, n_heads,
                                                           nkv, hd, d_sc);
    OKV_LAUNCHED("select score kernel");
    if (t_out > 0) {
        if (smem > 48 * 1024 && smem > c->topk_smem_set) {   /* per device: see attn_prepare */
            OKV_CU(cudaFuncSetAttribute(topk_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "top-k smem limit");
            c->topk_smem_set = smem;
        }
        topk_k<<<(unsigned)n_reqs * nkv, SEL_TOPK_THREADS, smem, c->sel_stream>>>(d_sc, d_meta, d_cand, nkv,
                                                                               dev_ids ? dev_ids : d_ids);
        OKV_LAUNCHED("select top-k kernel");
        if (dev_ids) {   /* device-side residency: the ids stay; the caller commits the ring */
            *dev_cand = d_cand;
            return OKV_OK;
        }
        if (async && !host_sort) {
            if ((size_t)t_out > c->sel_cap) {
                size_t cap = (size_t)t_out * 2;
                if (c->sel_h)
                    cudaFreeHost(c->sel_h);
                c->sel_h = NULL;
                c->sel_cap = 0;
                OKV_CU(cudaHostAlloc((void **)&c->sel_h, sizeof(int32_t) * cap, cudaHostAllocDefault), "select ids staging");
                c->sel_cap = cap;
            }
            if (!c->sel_ev_made) {
                OKV_CU(cudaEventCreateWithFlags(&c->sel_ev, cudaEventDisableTiming), "select event");
                c->sel_ev_made = true;
            }
            OKV_CU(cudaMemcpyAsync(c->sel_h, d_ids, sizeof(int32_t) * (size_t)t_out, cudaMemcpyDeviceToHost, c->stream),
                   "select ids copy");
            OKV_CU(cudaEventRecord(c->sel_ev, c->stream), "select event record");
            if ((st = okv_cuda_ring_commit(c, c->stream)) != OKV_OK)
                return st;
            c->sel_pending = true;
            c->sel_out = out;
            c->sel_n = (size_t)t_out;
            return OKV_OK;
        }
        OKV_CU(cudaMemcpyAsync(h_ids, d_ids, sizeof(int32_t) * (size_t)t_out, cudaMemcpyDeviceToHost, c->stream),
               "select ids copy");
    }
    if ((st = okv_cuda_ring_commit(c, c->stream)) != OKV_OK)
        return st;
    float *hsc = scores;
    if (!hsc && host_sort && !(hsc = (float *)okv_malloc(sizeof(float) * (size_t)t_sc, OKV_TAG_BACKEND)))
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda select_blocks: out of host memory");
    cudaError_t e = cudaSuccess;
    if (hsc)
        e = cudaMemcpyAsync(hsc, d_sc, sizeof(float) * (size_t)t_sc, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess) {
        memcpy(out, h_ids, sizeof(int32_t) * (size_t)t_out);
        if (host_sort)
            st = host_topk(reqs, n_reqs, nkv, hsc, out);
    }
    if (hsc != scores)
        okv_free(hsc);
    if (e != cudaSuccess)
        return okv_cuda_err(e, "select scores copy / synchronize", __FILE__, __LINE__);
    return st;
}
