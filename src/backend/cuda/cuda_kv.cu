/* KV tiers of the CUDA backend.
 *
 * Device tier: HBM, per layer an array of units, a unit being one KV head's block,
 * K [block_size][head_dim] then V, bf16 (unit_elems = 2*bs*hd). Host tier: pinned,
 * mapped host memory laid out [layer][host block][KV head][unit], so one (block, head)
 * is one contiguous unit in both tiers; bf16 like the device tier, or FP8 E4M3 (g.host_fp8:
 * encoded as rows are written, decoded by the gather into bf16 units; summaries and key
 * codes are built from the keys as stored). Summaries (kmin, kmax per host block and head,
 * bf16 like the keys) live in HBM, and with key_code_bits the per-token key codes of each
 * full host block and head (backend.h) beside them, built as a block's last token is written.
 *
 * kv_write (compute stream) writes the group slots and widens the summaries; the
 * write-through to the host tier runs on the copy stream and reads back the slots it
 * wrote. kv_fetch is one gather kernel per call on the copy stream that reads the
 * mapped host tier with 16-byte loads; a persistent grid of a few CTAs saturates PCIe.
 * kv_fetch_wait(layer) makes the compute stream wait on the layer's fetch events
 * (cudaStreamWaitEvent) and never blocks the host; it reports, one round late, how
 * long the compute stream actually waited there (timing events) and for how many
 * units. */
#include "backend/cuda/cuda_bench.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.cuh"

#include <math.h>
#include <string.h>

#define CTX(be) OKV_CUDA_CTX(be)
/* a kv_write of at most this many tokens and bytes written through to the host tier
 * (K and V in bf16) takes the fused kernel: its PCIe writes stay on the compute stream's
 * path, so they are kept to about a microsecond */
#define OKV_KVW_FUSED_MAX 64
#define OKV_KVW_FUSED_BYTES (64 << 10)

/* ---- bf16 atomics for the summaries (no NaN inputs) ----
 * The keys are stored in bf16, so their element-wise min and max are bf16 values: the
 * summaries hold them in bf16 exactly (half the HBM of fp32, the same bounds). */
static __device__ __forceinline__ unsigned short bf_order(unsigned short b)
{
    return (b & 0x8000u) ? (unsigned short)~b : (unsigned short)(b | 0x8000u);   /* unsigned order = float order */
}

static __device__ __forceinline__ void atomic_min_bf(okv_bf16 *a, okv_bf16 v)
{
    unsigned short *p = (unsigned short *)a, nv = __bfloat16_as_ushort(v), old = *(volatile unsigned short *)p;
    while (bf_order(nv) < bf_order(old)) {
        const unsigned short prev = atomicCAS(p, old, nv);
        if (prev == old)
            break;
        old = prev;
    }
}

static __device__ __forceinline__ void atomic_max_bf(okv_bf16 *a, okv_bf16 v)
{
    unsigned short *p = (unsigned short *)a, nv = __bfloat16_as_ushort(v), old = *(volatile unsigned short *)p;
    while (bf_order(nv) > bf_order(old)) {
        const unsigned short prev = atomicCAS(p, old, nv);
        if (prev == old)
            break;
        old = prev;
    }
}

/* ---- FP8 E4M3 host tier (backend.h host_fp8; e4m3_enc / e4m3_dec in cuda_internal.h) ---- */

/* a key as the host tier stores it */
static __device__ __forceinline__ okv_bf16 e4m3_round(okv_bf16 x, bool f8) { return f8 ? e4m3_dec(e4m3_enc(x)) : x; }

/* element i of a host layer (bytes) */
static __device__ __forceinline__ okv_bf16 host_get(const uint8_t *h, size_t i, bool f8)
{
    return f8 ? e4m3_dec(h[i]) : ((const okv_bf16 *)h)[i];
}

static __device__ __forceinline__ void host_put(uint8_t *h, size_t i, okv_bf16 x, bool f8)
{
    if (f8)
        h[i] = e4m3_enc(x);
    else
        ((okv_bf16 *)h)[i] = x;
}

/* test_cuda_ops: the device encoder over every bf16 bit pattern, and the decoder over every code */
static __global__ void e4m3_table_k(uint8_t *enc, okv_bf16 *dec, __nv_bfloat162 *dec2)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 65536) {
        enc[i] = e4m3_enc(__ushort_as_bfloat16((unsigned short)i));
        dec2[i] = e4m3x2_dec((unsigned short)i);
    }
    if (i < 256)
        dec[i] = e4m3_dec((uint8_t)i);
}

extern "C" enum okv_status okv_cuda_e4m3_tables(uint8_t *enc, uint16_t *dec, uint16_t *dec2)
{
    uint8_t *de = NULL;
    okv_bf16 *dd = NULL;
    __nv_bfloat162 *dd2 = NULL;
    if (cudaMalloc((void **)&de, 65536) != cudaSuccess || cudaMalloc((void **)&dd, 512) != cudaSuccess ||
        cudaMalloc((void **)&dd2, 4 * 65536) != cudaSuccess) {
        cudaFree(de);
        cudaFree(dd);
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda: e4m3 tables");
    }
    e4m3_table_k<<<256, 256>>>(de, dd, dd2);
    cudaError_t e = cudaMemcpy(enc, de, 65536, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(dec, dd, 512, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(dec2, dd2, 4 * 65536, cudaMemcpyDeviceToHost);
    cudaFree(de);
    cudaFree(dd);
    cudaFree(dd2);
    OKV_CU(e, "e4m3 tables");
    return OKV_OK;
}

struct kvw_args {
    const float *k, *v;           /* [n][nkv][hd] */
    okv_bf16 *layer;              /* device units of the layer */
    okv_bf16 *summ;               /* summaries of the layer: [n_host_blocks][nkv][2][hd], or NULL */
    const int32_t *tok_slot, *tok_host;
    int nkv, hd, bs;
    size_t unit_elems;
    bool f8;                      /* fp8 host tier: summaries widen by the keys as stored */
};

/* tokens that start a host block reset its summary to their key */
static __global__ void kv_summary_reset_k(struct kvw_args a)
{
    const int t = blockIdx.x;
    const int th = a.tok_host[t];
    if (th < 0 || th % a.bs != 0)
        return;
    const int hb = th / a.bs;
    for (int i = threadIdx.x; i < a.nkv * a.hd; i += blockDim.x) {
        const int h = i / a.hd, d = i % a.hd;
        const okv_bf16 key = e4m3_round(__float2bfloat16_rn(a.k[(size_t)t * a.nkv * a.hd + i]), a.f8);
        okv_bf16 *s = a.summ + ((size_t)hb * a.nkv + h) * 2 * a.hd;
        s[d] = key;
        s[a.hd + d] = key;
    }
}

/* One CTA per token: store K, V of every head into its group slot and widen the host
 * block's summary. FUSED (decode-shaped writes, every token in its own host block, see
 * cuda_kv_write): also reset the summary of a token that starts its block (instead of
 * kv_summary_reset_k before) and write the row through to the mapped host tier (instead of
 * kv_write_through_k on the copy stream; a warp stores 64 contiguous bytes at a time). */
template <bool FUSED>
static __global__ void kv_write_k(struct kvw_args a, uint8_t *host_layer)
{
    const int t = blockIdx.x;
    const int slot = a.tok_slot[t] / a.bs, off = a.tok_slot[t] % a.bs;
    const int th = a.summ ? a.tok_host[t] : -1;
    for (int i = threadIdx.x; i < a.nkv * a.hd; i += blockDim.x) {
        const int h = i / a.hd, d = i % a.hd;
        const okv_bf16 kb = __float2bfloat16_rn(a.k[(size_t)t * a.nkv * a.hd + i]);
        const okv_bf16 vb = __float2bfloat16_rn(a.v[(size_t)t * a.nkv * a.hd + i]);
        okv_bf16 *u = a.layer + ((size_t)slot * a.nkv + h) * a.unit_elems + (size_t)off * a.hd + d;
        u[0] = kb;
        u[(size_t)a.bs * a.hd] = vb;
        if (th < 0)
            continue;
        const int hb = th / a.bs, hoff = th % a.bs;
        okv_bf16 *s = a.summ + ((size_t)hb * a.nkv + h) * 2 * a.hd;
        const okv_bf16 ks = e4m3_round(kb, a.f8);
        if (FUSED && hoff == 0) {
            s[d] = ks;
            s[a.hd + d] = ks;
        } else {
            atomic_min_bf(s + d, ks);
            atomic_max_bf(s + a.hd + d, ks);
        }
        if (FUSED) {
            const size_t hi = ((size_t)hb * a.nkv + h) * a.unit_elems + (size_t)hoff * a.hd + d;
            host_put(host_layer, hi, kb, a.f8);
            host_put(host_layer, hi + (size_t)a.bs * a.hd, vb, a.f8);
        }
    }
}

static __device__ __forceinline__ okv_bf16 bf_min(okv_bf16 a, okv_bf16 b)
{
    return bf_order(__bfloat16_as_ushort(b)) < bf_order(__bfloat16_as_ushort(a)) ? b : a;
}

static __device__ __forceinline__ okv_bf16 bf_max(okv_bf16 a, okv_bf16 b)
{
    return bf_order(__bfloat16_as_ushort(b)) > bf_order(__bfloat16_as_ushort(a)) ? b : a;
}

union bf8 {   /* 8 bf16: one 16-byte piece */
    uint4 u;
    okv_bf16 b[8];
};

/* kv_write_k's work 8 elements a thread, one thread per (token, 8 consecutive dims of a head),
 * 16-byte loads and stores (head_dim a multiple of 8, aligned pointers: cuda_kv_write checks).
 * HOST (decode-shaped writes, every token in its own host block, as FUSED): the summary is
 * widened by plain loads and stores, no atomics (no other thread touches those elements), and
 * the row goes to the mapped host tier 16 (bf16) or 8 (fp8) bytes a store. */
template <bool HOST>
static __global__ void kv_write_vec_k(struct kvw_args a, uint8_t *host_layer, int n)
{
    const int vecs = a.nkv * a.hd / 8;
    const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= (long long)n * vecs)
        return;
    const int t = (int)(g / vecs), i = (int)(g % vecs) * 8;
    const int h = i / a.hd, d = i % a.hd;
    const int slot = a.tok_slot[t] / a.bs, off = a.tok_slot[t] % a.bs;
    const float4 *kp = (const float4 *)(a.k + (size_t)t * a.nkv * a.hd + i);
    const float4 *vp = (const float4 *)(a.v + (size_t)t * a.nkv * a.hd + i);
    const float4 k0 = kp[0], k1 = kp[1], v0 = vp[0], v1 = vp[1];
    const float kf[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
    const float vf[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    union bf8 kb, vb;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        kb.b[j] = __float2bfloat16_rn(kf[j]);
        vb.b[j] = __float2bfloat16_rn(vf[j]);
    }
    okv_bf16 *u = a.layer + ((size_t)slot * a.nkv + h) * a.unit_elems + (size_t)off * a.hd + d;
    *(uint4 *)u = kb.u;
    *(uint4 *)(u + (size_t)a.bs * a.hd) = vb.u;
    if (!HOST)
        return;
    const int th = a.tok_host[t];
    if (th < 0)
        return;
    const int hb = th / a.bs, hoff = th % a.bs;
    okv_bf16 *s = a.summ + ((size_t)hb * a.nkv + h) * 2 * a.hd + d;
    union bf8 lo, hi;
    if (hoff != 0) {
        lo.u = *(const uint4 *)s;
        hi.u = *(const uint4 *)(s + a.hd);
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const okv_bf16 ks = e4m3_round(kb.b[j], a.f8);
        lo.b[j] = hoff == 0 ? ks : bf_min(lo.b[j], ks);
        hi.b[j] = hoff == 0 ? ks : bf_max(hi.b[j], ks);
    }
    *(uint4 *)s = lo.u;
    *(uint4 *)(s + a.hd) = hi.u;
    const size_t di = ((size_t)hb * a.nkv + h) * a.unit_elems + (size_t)hoff * a.hd + d;
    if (a.f8) {
        uint2 ok, ov;
        uint8_t *okb = (uint8_t *)&ok, *ovb = (uint8_t *)&ov;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            okb[j] = e4m3_enc(kb.b[j]);
            ovb[j] = e4m3_enc(vb.b[j]);
        }
        *(uint2 *)(host_layer + di) = ok;
        *(uint2 *)(host_layer + di + (size_t)a.bs * a.hd) = ov;
    } else {
        *(uint4 *)((okv_bf16 *)host_layer + di) = kb.u;
        *(uint4 *)((okv_bf16 *)host_layer + di + (size_t)a.bs * a.hd) = vb.u;
    }
}

/* copy stream: each written row (K and V of every head) from its group slot to the host tier
 * (16-byte pieces of 8 bf16; an fp8 tier takes them as 8 bytes) */
static __global__ void kv_write_through_k(const okv_bf16 *layer, uint8_t *host_layer, const int32_t *tok_slot,
                                          const int32_t *tok_host, int nkv, int hd, int bs, size_t unit_elems, bool f8)
{
    const int t = blockIdx.x;
    const int th = tok_host[t];
    if (th < 0)
        return;
    const int slot = tok_slot[t] / bs, off = tok_slot[t] % bs, hb = th / bs, hoff = th % bs;
    const int pieces = hd / 8;   /* 16-byte pieces of a row */
    for (int i = threadIdx.x; i < nkv * 2 * pieces; i += blockDim.x) {
        const int h = i / (2 * pieces), r = i % (2 * pieces), kv = r / pieces, p = r % pieces;
        const uint4 *src = (const uint4 *)(layer + ((size_t)slot * nkv + h) * unit_elems + (size_t)kv * bs * hd +
                                           (size_t)off * hd) + p;
        const size_t di = ((size_t)hb * nkv + h) * unit_elems + (size_t)kv * bs * hd + (size_t)hoff * hd + (size_t)p * 8;
        if (f8) {
            const uint4 w = *src;
            const okv_bf16 *x = (const okv_bf16 *)&w;
            uint2 o;
            uint8_t *ob = (uint8_t *)&o;
#pragma unroll
            for (int j = 0; j < 8; j++)
                ob[j] = e4m3_enc(x[j]);
            *(uint2 *)(host_layer + di) = o;
        } else {
            *(uint4 *)((okv_bf16 *)host_layer + di) = *src;
        }
    }
}

/* gather of units from the mapped host tier: flat 16-byte pieces (ppu a unit), U loads in
 * flight per thread; an fp8 tier's piece (16 codes) becomes two bf16 pieces. A list written on
 * the device (d_n: its length, then a count of CTAs done reading it) is reset by the last CTA
 * to read its length, for the next install. */
template <int U, bool F8>
static __global__ void __launch_bounds__(256) kv_gather_k(uint4 *dst_dev, const uint4 *src_layer, const int32_t *src_unit,
                                                          const int32_t *dst_unit, long long total, int ppu,
                                                          long long layer_off, long long stage_off, int *d_n)
{
    if (d_n) {
        __shared__ long long s_total;
        if (threadIdx.x == 0) {
            s_total = (long long)*(volatile int *)d_n * ppu;
            __threadfence();
            if (atomicAdd(d_n + 1, 1) == (int)gridDim.x - 1) {
                d_n[0] = 0;
                d_n[1] = 0;
            }
        }
        __syncthreads();
        total = s_total;
    }
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i0 = (long long)blockIdx.x * blockDim.x + threadIdx.x; i0 < total; i0 += U * stride) {
        uint4 v[U];
        long long didx[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long i = i0 + u * stride;
            didx[u] = -1;
            if (i < total) {
                const int unit = (int)(i / ppu), p = (int)(i % ppu);
                v[u] = src_layer[(long long)src_unit[unit] * ppu + p];
                didx[u] = (okv_cuda_unit_global(dst_unit[unit], layer_off, stage_off) * ppu + p) * (F8 ? 2 : 1);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (didx[u] >= 0) {
                if (F8) {
                    const unsigned short *b2 = (const unsigned short *)&v[u];
                    uint4 o[2];
                    __nv_bfloat162 *x = (__nv_bfloat162 *)o;
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        x[j] = e4m3x2_dec(b2[j]);
                    dst_dev[didx[u]] = o[0];
                    dst_dev[didx[u] + 1] = o[1];
                } else {
                    dst_dev[didx[u]] = v[u];
                }
            }
    }
}

/* loads in flight per thread: OKV_GATHER_UNROLL (1, 2, 4 or 8; default 2); ppu: 16-byte pieces of a host unit */
template <bool F8>
static void gather_launch_t(const struct cuda_ctx *c, int ctas, uint4 *dst_dev, const uint4 *src_layer, const int32_t *src_unit,
                            const int32_t *dst_unit, long long total, int ppu, long long layer_off, long long stage_off, int *d_n)
{
    switch (c->gather_unroll) {
    case 1: kv_gather_k<1, F8><<<ctas, 256, 0, c->copy>>>(dst_dev, src_layer, src_unit, dst_unit, total, ppu, layer_off, stage_off, d_n); break;
    case 2: kv_gather_k<2, F8><<<ctas, 256, 0, c->copy>>>(dst_dev, src_layer, src_unit, dst_unit, total, ppu, layer_off, stage_off, d_n); break;
    case 8: kv_gather_k<8, F8><<<ctas, 256, 0, c->copy>>>(dst_dev, src_layer, src_unit, dst_unit, total, ppu, layer_off, stage_off, d_n); break;
    default: kv_gather_k<4, F8><<<ctas, 256, 0, c->copy>>>(dst_dev, src_layer, src_unit, dst_unit, total, ppu, layer_off, stage_off, d_n); break;
    }
}

static void gather_launch(const struct cuda_ctx *c, const okv_bkv *kv, int ctas, const uint4 *src_layer, const int32_t *src_unit,
                          const int32_t *dst_unit, long long total, int ppu, long long layer_off, long long stage_off, int *d_n)
{
    if (kv->g.host_fp8)
        gather_launch_t<true>(c, ctas, (uint4 *)kv->dev, src_layer, src_unit, dst_unit, total, ppu, layer_off, stage_off, d_n);
    else
        gather_launch_t<false>(c, ctas, (uint4 *)kv->dev, src_layer, src_unit, dst_unit, total, ppu, layer_off, stage_off, d_n);
}

/* summaries of one host block, all layers and heads, from its first n_valid tokens in the host tier */
static __global__ void kv_summary_rebuild_k(okv_bf16 *summ, const uint8_t *host, int n_host_blocks, int nkv, int hd, int bs,
                                            size_t unit_elems, int hb, int n_valid, bool f8)
{
    const int l = blockIdx.x / nkv, h = blockIdx.x % nkv;
    const size_t k0 = (((size_t)l * n_host_blocks + hb) * nkv + h) * unit_elems;
    okv_bf16 *s = summ + (((size_t)l * n_host_blocks + hb) * nkv + h) * 2 * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float mn = INFINITY, mx = -INFINITY;
        for (int i = 0; i < n_valid; i++) {
            float x = __bfloat162float(host_get(host, k0 + (size_t)i * hd + d, f8));
            mn = fminf(mn, x);
            mx = fmaxf(mx, x);
        }
        s[d] = __float2bfloat16_rn(mn);   /* bf16 values (or infinities): exact */
        s[hd + d] = __float2bfloat16_rn(mx);
    }
}

/* ---- per-token key codes (backend.h) ----
 * Byte j of a (block, head)'s codes packs elements j*8/B ... of its keys [bs][hd] (element
 * t*hd + d), each rounded to one of 2^B - 1 steps of the summary's [kmin_d, kmax_d], as the
 * CPU backend does (cpu_key_quantize). */
/* k: the unit's keys, bf16 (kb, rounded through fp8 when f8) or fp8 codes (k8) */
static __device__ __forceinline__ unsigned code_byte(const okv_bf16 *kb, const uint8_t *k8, bool f8, const okv_bf16 *s, int hd,
                                                     int bits, int j)
{
    const int per = 8 / bits, top = (1 << bits) - 1;
    unsigned byte = 0;
    for (int e = 0; e < per; e++) {
        const int x = j * per + e, d = x % hd;
        const float lo = __bfloat162float(s[d]), span = __bfloat162float(s[hd + d]) - lo;
        const okv_bf16 kx = k8 ? e4m3_dec(k8[x]) : e4m3_round(kb[x], f8);
        int c = span > 0.f ? (int)rintf((__bfloat162float(kx) - lo) / span * (float)top) : 0;
        c = c < 0 ? 0 : c > top ? top : c;
        byte |= (unsigned)c << (e * bits);
    }
    return byte;
}

/* After a kv_write (compute stream, behind it): the codes of every host block that one of
 * its tokens completes (the token at the block's last offset), from the keys in that token's
 * group slot and the block's summary, final by now. The group slot holds the whole block:
 * the engine keeps a block in one group slot from its first token until it leaves the
 * window (the CPU backend reads the host tier, which holds the same keys). */
static __global__ void kv_codes_write_k(const okv_bf16 *layer, const okv_bf16 *summ, uint8_t *codes, const int32_t *tok_slot,
                                        const int32_t *tok_host, int nkv, int hd, int bs, size_t unit_elems, int bits,
                                        int code_bytes, bool f8)
{
    const int t = blockIdx.x, th = tok_host[t];
    if (th < 0 || th % bs != bs - 1)
        return;
    const int slot = tok_slot[t] / bs, hb = th / bs;
    for (int i = threadIdx.x; i < nkv * code_bytes; i += blockDim.x) {
        const int h = i / code_bytes, j = i % code_bytes;
        codes[((size_t)hb * nkv + h) * code_bytes + j] =
            (uint8_t)code_byte(layer + ((size_t)slot * nkv + h) * unit_elems, NULL, f8, summ + ((size_t)hb * nkv + h) * 2 * hd, hd,
                               bits, j);
    }
}

/* the codes of one full host block, all layers and heads, from the host tier (after a
 * summary rebuild, or random benchmark KV); one CTA per (layer, head) */
static __global__ void kv_codes_host_k(const uint8_t *host, const okv_bf16 *summ, uint8_t *codes, int n_host_blocks, int nkv,
                                       int hd, size_t unit_elems, int hb, int bits, int code_bytes, bool f8)
{
    const size_t u = ((size_t)(blockIdx.x / nkv) * n_host_blocks + hb) * nkv + blockIdx.x % nkv;
    for (int j = threadIdx.x; j < code_bytes; j += blockDim.x)
        codes[u * code_bytes + j] = (uint8_t)(f8 ? code_byte(NULL, host + u * unit_elems, true, summ + u * 2 * hd, hd, bits, j)
                                                 : code_byte((const okv_bf16 *)host + u * unit_elems, NULL, false,
                                                             summ + u * 2 * hd, hd, bits, j));
}

static __global__ void summary_init_k(okv_bf16 *summ, size_t n_vec, int hd)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n_vec * 2 * hd; i += (size_t)gridDim.x * blockDim.x)
        summ[i] = __float2bfloat16_rn(((i / hd) & 1) ? -INFINITY : INFINITY);
}

/* ---- allocation ---- */

void okv_cuda_kv_free(okv_backend *be, okv_bkv *kv)
{
    if (!kv)
        return;
    struct cuda_ctx *c = CTX(be);
    if (c->side)
        cudaStreamSynchronize(c->side);
    cudaStreamSynchronize(c->copy);
    cudaStreamSynchronize(c->stream);
    if (kv->dev)
        cudaFree(kv->dev);
    okv_cuda_host_pin_free(&kv->host_mem);
    if (kv->summ)
        cudaFree(kv->summ);
    if (kv->codes)
        cudaFree(kv->codes);
    if (kv->fetch_ev)
        for (int i = 0; i < 2 * kv->g.n_layers * OKV_CUDA_FETCH_EVENTS; i++)
            if (kv->fetch_ev[i])
                cudaEventDestroy(kv->fetch_ev[i]);
    if (kv->ready_ev)
        for (int i = 0; i < 2 * kv->g.n_layers; i++)
            if (kv->ready_ev[i])
                cudaEventDestroy(kv->ready_ev[i]);
    okv_free(kv->ready_ev);
    okv_free(kv->fetch_set);
    okv_free(kv->meas_count);
    if (kv->wt_ev)
        for (int i = 0; i < kv->g.n_layers; i++)
            if (kv->wt_ev[i])
                cudaEventDestroy(kv->wt_ev[i]);
    okv_free(kv->fetch_ev);
    okv_free(kv->fetch_units);
    okv_free(kv->fetch_count);
    if (kv->attn_ev)
        for (int i = 0; i < kv->g.n_layers; i++)
            if (kv->attn_ev[i])
                cudaEventDestroy(kv->attn_ev[i]);
    okv_free(kv->wt_ev);
    okv_free(kv->wt_pending);
    okv_free(kv->attn_ev);
    okv_free(kv->attn_rec);
    okv_free(kv->layer_units);
    okv_free(kv->layer_off);
    okv_cuda_resid_free(kv);
    okv_free(kv);
}

#define KV_FAIL(st) do { (void)cudaGetLastError(); okv_cuda_kv_free(be, kv); return (st); } while (0)

enum okv_status okv_cuda_kv_alloc(okv_backend *be, const struct okv_kv_geometry *g, okv_bkv **out)
{
    *out = NULL;
    if (!okv_key_code_bits_valid(g->key_code_bits))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: key codes of %d bits (1, 2 or 4 allowed)", g->key_code_bits);
    struct cuda_ctx *c = CTX(be);
    if (g->n_layers <= 0 || g->n_group_slots < 0 || g->n_sparse_units < 0 || g->n_host_blocks < 0 || g->n_stage_units < 0 ||
        g->block_size <= 0 ||
        g->block_size > 256 || g->n_kv_heads <= 0 || g->head_dim <= 0 ||
        (g->n_group_slots == 0 && g->n_sparse_units == 0 && !g->layer_sparse_units))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: bad KV geometry");
    if (g->head_dim % 8 || g->head_dim > 256)
        return okv_set_error(OKV_ERR_UNSUPPORTED, "cuda backend: head_dim %d not supported (multiples of 8 up to 256)",
                             g->head_dim);
    okv_bkv *kv = (okv_bkv *)okv_calloc(1, sizeof *kv, OKV_TAG_KV);
    if (!kv)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory");
    kv->g = *g;
    kv->g.layer_sparse_units = NULL;
    const int L = g->n_layers;
    kv->unit_elems = (size_t)2 * g->block_size * g->head_dim;
    kv->host_unit_bytes = kv->unit_elems * (g->host_fp8 ? 1 : sizeof(okv_bf16));
    kv->layer_units = (size_t *)okv_calloc((size_t)L, sizeof(size_t), OKV_TAG_KV);
    kv->layer_off = (size_t *)okv_calloc((size_t)L, sizeof(size_t), OKV_TAG_KV);
    kv->fetch_ev = (cudaEvent_t *)okv_calloc((size_t)2 * L * OKV_CUDA_FETCH_EVENTS, sizeof(cudaEvent_t), OKV_TAG_KV);
    kv->fetch_units = (int *)okv_calloc((size_t)2 * L * OKV_CUDA_FETCH_EVENTS, sizeof(int), OKV_TAG_KV);
    kv->fetch_count = (int *)okv_calloc((size_t)L, sizeof(int), OKV_TAG_KV);
    kv->fetch_set = (int *)okv_calloc((size_t)L, sizeof(int), OKV_TAG_KV);
    kv->meas_count = (int *)okv_calloc((size_t)L, sizeof(int), OKV_TAG_KV);
    kv->ready_ev = (cudaEvent_t *)okv_calloc((size_t)2 * L, sizeof(cudaEvent_t), OKV_TAG_KV);
    kv->wt_ev = (cudaEvent_t *)okv_calloc((size_t)L, sizeof(cudaEvent_t), OKV_TAG_KV);
    kv->wt_pending = (bool *)okv_calloc((size_t)L, sizeof(bool), OKV_TAG_KV);
    kv->attn_ev = (cudaEvent_t *)okv_calloc((size_t)L, sizeof(cudaEvent_t), OKV_TAG_KV);
    kv->attn_rec = (bool *)okv_calloc((size_t)L, sizeof(bool), OKV_TAG_KV);
    if (!kv->layer_units || !kv->layer_off || !kv->fetch_ev || !kv->fetch_units || !kv->fetch_count || !kv->fetch_set ||
        !kv->meas_count || !kv->ready_ev || !kv->wt_ev || !kv->wt_pending || !kv->attn_ev || !kv->attn_rec)
        KV_FAIL(okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory"));
    for (int l = 0; l < L; l++) {
        int sp = g->layer_sparse_units ? g->layer_sparse_units[l] : g->n_sparse_units;
        if (sp < 0)
            KV_FAIL(okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: layer %d: negative sparse units", l));
        kv->layer_units[l] = (size_t)g->n_group_slots * g->n_kv_heads + (size_t)sp;
        kv->layer_off[l] = kv->total_units;
        kv->total_units += kv->layer_units[l];
        const int ids = (int)(kv->layer_units[l] / (size_t)g->n_kv_heads);
        kv->slot_ids = l == 0 || ids < kv->slot_ids ? ids : kv->slot_ids;
    }
    const char *sc = getenv("OKV_KVW_SCALAR");   /* kv_write one element a thread (to compare, to test) */
    kv->kvw_scalar = sc && *sc && strcmp(sc, "0") != 0;
    cudaError_t e;
    /* timing events: kv_fetch_wait measures whether the compute stream waited for them */
    for (int i = 0; i < 2 * L * OKV_CUDA_FETCH_EVENTS; i++)
        if ((e = cudaEventCreateWithFlags(&kv->fetch_ev[i], cudaEventDefault)) != cudaSuccess)
            KV_FAIL(okv_cuda_err(e, "KV fetch events", __FILE__, __LINE__));
    for (int i = 0; i < 2 * L; i++)
        if ((e = cudaEventCreateWithFlags(&kv->ready_ev[i], cudaEventDefault)) != cudaSuccess)
            KV_FAIL(okv_cuda_err(e, "KV fetch-ready events", __FILE__, __LINE__));
    for (int i = 0; i < L; i++)
        if ((e = cudaEventCreateWithFlags(&kv->attn_ev[i], cudaEventDisableTiming)) != cudaSuccess)
            KV_FAIL(okv_cuda_err(e, "KV attention events", __FILE__, __LINE__));
    for (int i = 0; i < L; i++)
        if ((e = cudaEventCreateWithFlags(&kv->wt_ev[i], cudaEventDisableTiming)) != cudaSuccess)
            KV_FAIL(okv_cuda_err(e, "KV write-through events", __FILE__, __LINE__));
    const size_t dev_bytes = (kv->total_units + 2 * (size_t)g->n_stage_units) * kv->unit_elems * sizeof(okv_bf16);
    const size_t n_vec = (size_t)L * g->n_host_blocks * g->n_kv_heads;
    const size_t host_bytes = n_vec * kv->host_unit_bytes;
    if ((e = cudaMalloc((void **)&kv->dev, dev_bytes ? dev_bytes : 16)) != cudaSuccess) {
        kv->dev = NULL;
        KV_FAIL(okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: cannot allocate the device KV tier (%zu MiB of HBM): %s",
                              dev_bytes >> 20, cudaGetErrorString(e)));
    }
    /* zeros: the warp-specialised prefill kernel copies whole blocks, rows past a sequence's end
     * included, and multiplies their V by P = 0, so every row must hold a finite value
     * (cuda_prefill_ws.cu); written rows always do */
    if ((e = cudaMemsetAsync(kv->dev, 0, dev_bytes ? dev_bytes : 16, c->stream)) != cudaSuccess)
        KV_FAIL(okv_cuda_err(e, "device KV tier init", __FILE__, __LINE__));
    if (n_vec) {
        enum okv_status pst = okv_cuda_host_pin_alloc(host_bytes, &kv->host_mem);
        if (pst != OKV_OK)
            KV_FAIL(pst);
        kv->host = (uint8_t *)kv->host_mem.h;
        kv->host_d = (uint8_t *)kv->host_mem.d;
        if (host_bytes >= ((size_t)1 << 30))
            OKV_LOG_INFO("cuda device %d: host KV tier of %zu MiB pinned in %.1f s (%s)", c->device, host_bytes >> 20,
                         kv->host_mem.seconds, kv->host_mem.registered ? "populated in parallel, registered" : "cudaHostAlloc");
        if ((e = cudaMalloc((void **)&kv->summ, n_vec * 2 * g->head_dim * sizeof(okv_bf16))) != cudaSuccess) {
            kv->summ = NULL;
            KV_FAIL(okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: cannot allocate the KV summaries (%zu MiB of HBM): %s",
                                  (n_vec * 2 * g->head_dim * sizeof(okv_bf16)) >> 20, cudaGetErrorString(e)));
        }
        summary_init_k<<<256, 256, 0, c->stream>>>(kv->summ, n_vec, g->head_dim);
        if (g->key_code_bits) {
            const size_t cb = n_vec * okv_key_code_bytes(g);
            if ((e = cudaMalloc((void **)&kv->codes, cb)) != cudaSuccess) {
                kv->codes = NULL;
                KV_FAIL(okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: cannot allocate the key codes (%zu MiB of HBM): %s",
                                      cb >> 20, cudaGetErrorString(e)));
            }
            if ((e = cudaMemsetAsync(kv->codes, 0, cb, c->stream)) != cudaSuccess)
                KV_FAIL(okv_cuda_err(e, "key codes init", __FILE__, __LINE__));
        }
        if ((e = cudaGetLastError()) != cudaSuccess)
            KV_FAIL(okv_cuda_err(e, "summary init kernel", __FILE__, __LINE__));
    }
    if ((e = cudaStreamSynchronize(c->stream)) != cudaSuccess)
        KV_FAIL(okv_cuda_err(e, "KV allocation", __FILE__, __LINE__));
    *out = kv;
    return OKV_OK;
}

static size_t cuda_kv_unit_bytes(const okv_bkv *kv) { return kv->unit_elems * sizeof(okv_bf16); }

static size_t cuda_kv_device_bytes(const okv_bkv *kv)
{
    return okv_cuda_resid_bytes(kv) + (kv->total_units + 2 * (size_t)kv->g.n_stage_units) * kv->unit_elems * sizeof(okv_bf16) +
           (size_t)kv->g.n_layers * kv->g.n_host_blocks * kv->g.n_kv_heads *
               (2 * kv->g.head_dim * sizeof(okv_bf16) + (kv->codes ? okv_key_code_bytes(&kv->g) : 0));
}

static size_t cuda_kv_host_unit_bytes(const okv_bkv *kv) { return kv->host_unit_bytes; }

static size_t cuda_kv_host_bytes(const okv_bkv *kv)
{
    return (size_t)kv->g.n_layers * kv->g.n_host_blocks * kv->g.n_kv_heads * kv->host_unit_bytes;
}

/* a host layer's first byte (device alias) */
static uint8_t *host_layer_d(const okv_bkv *kv, int layer)
{
    return kv->host_d + (size_t)layer * kv->g.n_host_blocks * kv->g.n_kv_heads * kv->host_unit_bytes;
}

static okv_bf16 *layer_units(const okv_bkv *kv, int layer) { return kv->dev + kv->layer_off[layer] * kv->unit_elems; }

static size_t host_unit_index(const okv_bkv *kv, int layer, int hb, int head)
{
    return ((size_t)layer * kv->g.n_host_blocks + (size_t)hb) * kv->g.n_kv_heads + (size_t)head;
}

static void bf16_to_f32(float *dst, const okv_bf16 *src, size_t n)
{
    const uint16_t *s = (const uint16_t *)src;
    for (size_t i = 0; i < n; i++)
        dst[i] = okv_bf16_to_f32(s[i]);
}

/* ---- reads (tests, checks): synchronous ---- */

static enum okv_status cuda_kv_unit_read(okv_backend *be, const okv_bkv *kv, int layer, int32_t unit, float *k, float *v)
{
    if (layer < 0 || layer >= kv->g.n_layers || !okv_cuda_unit_valid(kv, layer, unit))
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: KV unit (%d, %d) out of range", layer, unit);
    struct cuda_ctx *c = CTX(be);
    enum okv_status st = okv_cuda_sync_all(c);
    if (st != OKV_OK)
        return st;
    okv_bf16 *tmp = (okv_bf16 *)okv_malloc(kv->unit_elems * sizeof(okv_bf16), OKV_TAG_KV);
    if (!tmp)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory");
    const long long gu = okv_cuda_unit_global(unit, (long long)kv->layer_off[layer], (long long)kv->total_units);
    cudaError_t e = cudaMemcpy(tmp, kv->dev + (size_t)gu * kv->unit_elems, kv->unit_elems * sizeof(okv_bf16),
                               cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) {
        const size_t half = kv->unit_elems / 2;
        bf16_to_f32(k, tmp, half);
        bf16_to_f32(v, tmp + half, half);
    }
    okv_free(tmp);
    OKV_CU(e, "kv_unit_read");
    return OKV_OK;
}

static enum okv_status cuda_kv_host_read(okv_backend *be, const okv_bkv *kv, int layer, int hb, int head, float *k, float *v)
{
    if (!kv->host || layer < 0 || layer >= kv->g.n_layers || hb < 0 || hb >= kv->g.n_host_blocks || head < 0 ||
        head >= kv->g.n_kv_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: host block (%d, %d, %d) out of range", layer, hb, head);
    enum okv_status st = okv_cuda_sync_all(CTX(be));
    if (st != OKV_OK)
        return st;
    const size_t half = kv->unit_elems / 2;
    if (kv->g.host_fp8) {
        const uint8_t *u = kv->host + host_unit_index(kv, layer, hb, head) * kv->host_unit_bytes;
        for (size_t i = 0; i < half; i++) {
            k[i] = okv_e4m3_to_f32(u[i]);
            v[i] = okv_e4m3_to_f32(u[half + i]);
        }
        return OKV_OK;
    }
    const okv_bf16 *u = (const okv_bf16 *)kv->host + host_unit_index(kv, layer, hb, head) * kv->unit_elems;
    bf16_to_f32(k, u, half);
    bf16_to_f32(v, u + half, half);
    return OKV_OK;
}

static enum okv_status cuda_kv_summary_read(okv_backend *be, const okv_bkv *kv, int layer, int hb, int head, float *kmin,
                                            float *kmax)
{
    if (!kv->summ || layer < 0 || layer >= kv->g.n_layers || hb < 0 || hb >= kv->g.n_host_blocks || head < 0 ||
        head >= kv->g.n_kv_heads)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: summary (%d, %d, %d) out of range", layer, hb, head);
    enum okv_status st = okv_cuda_sync_all(CTX(be));
    if (st != OKV_OK)
        return st;
    const int hd = kv->g.head_dim;
    const okv_bf16 *s = kv->summ + host_unit_index(kv, layer, hb, head) * 2 * hd;
    okv_bf16 *tmp = (okv_bf16 *)okv_malloc(sizeof(okv_bf16) * 2 * (size_t)hd, OKV_TAG_BACKEND);
    if (!tmp)
        return okv_set_error(OKV_ERR_NO_MEMORY, "cuda backend: out of host memory");
    cudaError_t e = cudaMemcpy(tmp, s, sizeof(okv_bf16) * 2 * (size_t)hd, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) {
        bf16_to_f32(kmin, tmp, (size_t)hd);
        bf16_to_f32(kmax, tmp + hd, (size_t)hd);
    }
    okv_free(tmp);
    OKV_CU(e, "kv_summary_read");
    return OKV_OK;
}

/* ---- cross-stream helpers ---- */

static enum okv_status copy_after_compute(struct cuda_ctx *c)
{
    OKV_CU(cudaEventRecord(c->ev_compute_mark, c->stream), "event record");
    OKV_CU(cudaStreamWaitEvent(c->copy, c->ev_compute_mark, 0), "copy stream wait");
    return OKV_OK;
}

static enum okv_status compute_after_copy(struct cuda_ctx *c)
{
    OKV_CU(cudaEventRecord(c->ev_copy_mark, c->copy), "event record");
    OKV_CU(cudaStreamWaitEvent(c->stream, c->ev_copy_mark, 0), "compute stream wait");
    return OKV_OK;
}

enum okv_status okv_cuda_kv_before_step(struct cuda_ctx *c)
{
    if (c->wt_last_pending) {
        OKV_CU(cudaStreamWaitEvent(c->stream, c->ev_wt_last, 0), "wait for the write-through");
        c->wt_last_pending = false;
    }
    return OKV_OK;
}

/* copy stream, behind the block's summary rebuild */
static enum okv_status codes_from_host(struct cuda_ctx *c, okv_bkv *kv, int hb)
{
    const int cb = (int)okv_key_code_bytes(&kv->g);
    kv_codes_host_k<<<kv->g.n_layers * kv->g.n_kv_heads, cb >= 256 ? 256 : ((cb + 31) / 32) * 32, 0, c->copy>>>(
        kv->host_d, kv->summ, kv->codes, kv->g.n_host_blocks, kv->g.n_kv_heads, kv->g.head_dim, kv->unit_elems, hb,
        kv->g.key_code_bits, cb, kv->g.host_fp8);
    OKV_LAUNCHED("key codes kernel (host tier)");
    return OKV_OK;
}

static enum okv_status cuda_kv_summary_rebuild(okv_backend *be, okv_bkv *kv, int hb, int n_valid)
{
    if (!kv->summ || hb < 0 || hb >= kv->g.n_host_blocks || n_valid < 0 || n_valid > kv->g.block_size)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: summary rebuild of block %d (%d tokens) invalid", hb, n_valid);
    struct cuda_ctx *c = CTX(be);
    enum okv_status st = copy_after_compute(c);   /* after kv_writes that widened it */
    if (st != OKV_OK)
        return st;
    kv_summary_rebuild_k<<<kv->g.n_layers * kv->g.n_kv_heads, 128, 0, c->copy>>>(
        kv->summ, kv->host_d, kv->g.n_host_blocks, kv->g.n_kv_heads, kv->g.head_dim, kv->g.block_size, kv->unit_elems, hb,
        n_valid, kv->g.host_fp8);
    OKV_LAUNCHED("summary rebuild kernel");
    if (kv->codes && n_valid == kv->g.block_size && (st = codes_from_host(c, kv, hb)) != OKV_OK)
        return st;
    return compute_after_copy(c);   /* selection reads the rebuilt summaries */
}

/* ---- write ---- */

/* compute stream, behind kv_write_k: the codes of the host blocks the write completes */
static enum okv_status codes_after_write(struct cuda_ctx *c, okv_bkv *kv, int layer, int n, const struct kvw_args *a)
{
    if (!kv->codes || !a->summ)
        return OKV_OK;
    const int cb = (int)okv_key_code_bytes(&kv->g), work = kv->g.n_kv_heads * cb;
    kv_codes_write_k<<<n, work >= 256 ? 256 : ((work + 31) / 32) * 32, 0, c->stream>>>(
        a->layer, a->summ, kv->codes + (size_t)layer * kv->g.n_host_blocks * kv->g.n_kv_heads * cb, a->tok_slot, a->tok_host,
        kv->g.n_kv_heads, kv->g.head_dim, kv->g.block_size, kv->unit_elems, kv->g.key_code_bits, cb, a->f8);
    OKV_LAUNCHED("key codes kernel");
    return OKV_OK;
}

/* kv_move: block (pair i, layer l) copies group slot src -> dst of layer l, 16 bytes a thread
 * (a slot's heads are consecutive units: n_kv_heads * unit_elems bf16) */
__global__ void kv_move_k(okv_bf16 *dev, const size_t *layer_off, const int32_t *pairs, int n, int nkv, size_t unit_elems)
{
    const int i = blockIdx.x, l = blockIdx.y;
    const size_t slot_elems = (size_t)nkv * unit_elems;
    const uint4 *src = (const uint4 *)(dev + (layer_off[l] + (size_t)pairs[i] * nkv) * unit_elems);
    uint4 *dst = (uint4 *)(dev + (layer_off[l] + (size_t)pairs[n + i] * nkv) * unit_elems);
    for (size_t j = threadIdx.x; j < slot_elems / 8; j += blockDim.x)
        dst[j] = src[j];
}

static enum okv_status cuda_kv_move(okv_backend *be, okv_bkv *kv, int n, const int32_t *src, const int32_t *dst)
{
    struct cuda_ctx *c = CTX(be);
    const int nkv = kv->g.n_kv_heads, L = kv->g.n_layers, ids = kv->slot_ids;
    for (int i = 0; i < n; i++)
        if (src[i] < 0 || src[i] >= ids || dst[i] < 0 || dst[i] >= ids || src[i] == dst[i])
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda kv_move: slot %d -> %d out of range (%d)", src[i], dst[i], ids);
    if (n == 0)
        return OKV_OK;
    for (int l = 0; l < L; l++)
        if (kv->wt_pending[l]) {   /* a write-through may still read a slot about to be overwritten */
            OKV_CU(cudaStreamWaitEvent(c->stream, kv->wt_ev[l], 0), "wait for the write-through");
            kv->wt_pending[l] = false;
        }
    /* [src[n]][dst[n]], then the layers' first units, through the staging ring */
    const size_t pbytes = ((sizeof(int32_t) * 2 * (size_t)n + 15) & ~(size_t)15), bytes = pbytes + sizeof(size_t) * L;
    void *hv = NULL, *d = NULL;
    enum okv_status st = okv_cuda_ring_alloc(c, bytes, &hv, &d);
    if (st != OKV_OK)
        return st;
    char *h = (char *)hv;
    memcpy(h, src, sizeof(int32_t) * (size_t)n);
    memcpy(h + sizeof(int32_t) * (size_t)n, dst, sizeof(int32_t) * (size_t)n);
    memcpy(h + pbytes, kv->layer_off, sizeof(size_t) * L);
    OKV_CU(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, c->stream), "kv_move upload");
    kv_move_k<<<dim3((unsigned)n, (unsigned)L), 256, 0, c->stream>>>(kv->dev, (const size_t *)((char *)d + pbytes),
                                                                  (const int32_t *)d, n, nkv, kv->unit_elems);
    OKV_LAUNCHED("kv_move kernel");
    /* a fetch into a layer's units waits for attn_ev alone: behind the move now, so that a gather
     * into the chunk just claimed (or into a slot just written) cannot overtake it */
    for (int l = 0; l < L; l++) {
        OKV_CU(cudaEventRecord(kv->attn_ev[l], c->stream), "kv_move event");
        kv->attn_rec[l] = true;
    }
    return okv_cuda_ring_commit(c, c->stream);
}

static enum okv_status cuda_kv_write(okv_backend *be, okv_bkv *kv, int layer, const okv_bmem *k, const okv_bmem *v)
{
    struct cuda_ctx *c = CTX(be);
    const struct okv_step_meta *meta = &c->meta;
    const int n = meta->n_tokens, nkv = kv->g.n_kv_heads, hd = kv->g.head_dim, bs = kv->g.block_size;
    if (layer < 0 || layer >= kv->g.n_layers || k->n < (size_t)n * nkv * hd || v->n < (size_t)n * nkv * hd)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda kv_write: bad layer %d or shapes", layer);
    const bool host = meta->tok_host && kv->host;
    for (int t = 0; t < n; t++) {
        if (meta->tok_slot[t] < 0 || meta->tok_slot[t] / bs >= kv->slot_ids)
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda kv_write: slot %d out of range", meta->tok_slot[t]);
        if (host && (meta->tok_host[t] < 0 || meta->tok_host[t] / bs >= kv->g.n_host_blocks))
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda kv_write: host slot %d out of range", meta->tok_host[t]);
    }
    if (n == 0)
        return OKV_OK;
    if (kv->wt_pending[layer]) {   /* the last write-through of this layer still reads the slots */
        OKV_CU(cudaStreamWaitEvent(c->stream, kv->wt_ev[layer], 0), "wait for the write-through");
        kv->wt_pending[layer] = false;
    }
    okv_bf16 *units = layer_units(kv, layer);
    struct kvw_args a;
    a.k = k->d;
    a.v = v->d;
    a.layer = units;
    a.summ = host ? kv->summ + (size_t)layer * kv->g.n_host_blocks * nkv * 2 * hd : NULL;
    a.tok_slot = c->step.tok_slot;
    a.tok_host = c->step.tok_host;
    a.nkv = nkv;
    a.hd = hd;
    a.bs = bs;
    a.unit_elems = kv->unit_elems;
    a.f8 = kv->g.host_fp8;
    const int threads = nkv * hd >= 256 ? 256 : ((nkv * hd + 31) / 32) * 32;
    /* decode-shaped (few tokens, no two in one host block, so that no block's summary
     * reset races with its widening): one kernel, no copy-stream round trip (a decode
     * step saves six API calls per layer) */
    bool fused = host && n <= OKV_KVW_FUSED_MAX && (size_t)n * nkv * hd * 4 <= OKV_KVW_FUSED_BYTES;
    /* neighbours suffice: a sequence's rows are consecutive in a batch, and no two sequences
     * write into one host block, so a block's rows are adjacent (the summary widening below
     * then has one thread per element and needs no atomics) */
    for (int t = 1; fused && t < n; t++)
        fused = meta->tok_host[t] / bs != meta->tok_host[t - 1] / bs;
    /* 8 elements a thread where the shapes allow (OKV_KVW_SCALAR=1: never, to compare) */
    const bool vec = hd % 8 == 0 && !kv->kvw_scalar &&
                     (((uintptr_t)a.k | (uintptr_t)a.v | (uintptr_t)units | (uintptr_t)(a.summ ? a.summ : units) |
                       (uintptr_t)(host ? host_layer_d(kv, layer) : (uint8_t *)units)) & 15) == 0;
    if (vec && (fused || !host)) {
        const long long work = (long long)n * nkv * (hd / 8);
        const int vt = work >= 256 ? 256 : (int)((work + 31) / 32) * 32;
        if (fused)
            kv_write_vec_k<true><<<(unsigned)((work + vt - 1) / vt), vt, 0, c->stream>>>(a, host_layer_d(kv, layer), n);
        else
            kv_write_vec_k<false><<<(unsigned)((work + vt - 1) / vt), vt, 0, c->stream>>>(a, NULL, n);
        OKV_LAUNCHED("kv_write kernel (16-byte pieces)");
        return fused ? codes_after_write(c, kv, layer, n, &a) : OKV_OK;
    }
    if (fused) {
        kv_write_k<true><<<n, threads, 0, c->stream>>>(a, host_layer_d(kv, layer));
        OKV_LAUNCHED("kv_write kernel (with summary and write-through)");
        return codes_after_write(c, kv, layer, n, &a);
    }
    if (host) {
        kv_summary_reset_k<<<n, threads, 0, c->stream>>>(a);
        OKV_LAUNCHED("summary reset kernel");
    }
    kv_write_k<false><<<n, threads, 0, c->stream>>>(a, NULL);
    OKV_LAUNCHED("kv_write kernel");
    if (!host)
        return OKV_OK;
    enum okv_status st = codes_after_write(c, kv, layer, n, &a);
    if (st != OKV_OK || (st = copy_after_compute(c)) != OKV_OK)
        return st;
    const int pieces = nkv * 2 * (hd / 8);
    kv_write_through_k<<<n, pieces >= 256 ? 256 : ((pieces + 31) / 32) * 32, 0, c->copy>>>(
        units, host_layer_d(kv, layer), c->step.tok_slot, c->step.tok_host, nkv, hd, bs, kv->unit_elems, kv->g.host_fp8);
    OKV_LAUNCHED("write-through kernel");
    OKV_CU(cudaEventRecord(kv->wt_ev[layer], c->copy), "event record");
    OKV_CU(cudaEventRecord(c->ev_wt_last, c->copy), "event record");
    kv->wt_pending[layer] = true;
    c->wt_last_pending = true;
    return OKV_OK;
}

/* ---- fetch ---- */

static int fetch_ctas(struct cuda_ctx *c, size_t bytes)
{
    if (c->fetch_ctas_override > 0)
        return c->fetch_ctas_override;
    /* 256 threads x 4 loads x 16 B = 16 KiB in flight per CTA; measured on the H200
     * (bench/cuda_gather): 32 CTAs reach ~90% of PCIe for 4-64 KiB units, more add nothing */
    size_t n = (bytes + 16383) / 16384;
    return n < 1 ? 1 : n > 32 ? 32 : (int)n;
}

/* index of (event set, layer, slot) in fetch_ev / fetch_units */
static inline int fetch_slot(const okv_bkv *kv, int set, int layer, int slot)
{
    return (set * kv->g.n_layers + layer) * OKV_CUDA_FETCH_EVENTS + slot;
}

/* an event behind the gather just queued on the copy stream, covering n units (kv_fetch_wait
 * waits for the layer's last one; a layer's events beyond OKV_CUDA_FETCH_EVENTS merge into
 * the last) */
static enum okv_status fetch_record(struct cuda_ctx *c, okv_bkv *kv, int layer, int n)
{
    int *cnt = &kv->fetch_count[layer];
    const int slot = *cnt < OKV_CUDA_FETCH_EVENTS ? *cnt : OKV_CUDA_FETCH_EVENTS - 1;
    const int at = fetch_slot(kv, kv->fetch_set[layer], layer, slot);
    OKV_CU(cudaEventRecord(kv->fetch_ev[at], c->copy), "kv_fetch event");
    if (*cnt < OKV_CUDA_FETCH_EVENTS) {
        kv->fetch_units[at] = n;
        (*cnt)++;
    } else {
        kv->fetch_units[at] += n;
    }
    return OKV_OK;
}

static enum okv_status cuda_kv_fetch(okv_backend *be, okv_bkv *kv, int layer, int n, const int32_t *src_host,
                                     const int32_t *dst_unit)
{
    if (n <= 0)
        return OKV_OK;
    struct cuda_ctx *c = CTX(be);
    if (!kv->host || layer < 0 || layer >= kv->g.n_layers)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda kv_fetch: no host tier or bad layer %d", layer);
    const int64_t max_host = (int64_t)kv->g.n_host_blocks * kv->g.n_kv_heads;
    for (int i = 0; i < n; i++)
        if (src_host[i] < 0 || src_host[i] >= max_host || !okv_cuda_unit_valid(kv, layer, dst_unit[i]))
            return okv_set_error(OKV_ERR_INVALID_ARG, "cuda kv_fetch: unit %d -> %d out of range", src_host[i], dst_unit[i]);
    void *h = NULL, *d = NULL;
    enum okv_status st = okv_cuda_ring_alloc(c, sizeof(int32_t) * 2 * (size_t)n, &h, &d);
    if (st != OKV_OK)
        return st;
    memcpy(h, src_host, sizeof(int32_t) * (size_t)n);
    memcpy((int32_t *)h + n, dst_unit, sizeof(int32_t) * (size_t)n);
    /* an attention still reading a replaced unit goes first: the layer's own units are
     * read by its attention alone; staging units are shared, so wait for everything */
    bool staging = false;
    for (int i = 0; i < n && !staging; i++)
        staging = (dst_unit[i] & OKV_UNIT_STAGE) != 0;
    if (!staging && kv->attn_rec[layer]) {
        OKV_CU(cudaStreamWaitEvent(c->copy, kv->attn_ev[layer], 0), "copy stream wait (layer attention)");
    } else if ((st = copy_after_compute(c)) != OKV_OK) {
        return st;
    }
    OKV_CU(cudaMemcpyAsync(d, h, sizeof(int32_t) * 2 * (size_t)n, cudaMemcpyHostToDevice, c->copy), "kv_fetch index upload");
    const int ppu = (int)(kv->host_unit_bytes / 16);
    const long long total = (long long)n * ppu;
    const int ctas = fetch_ctas(c, (size_t)total * 16);
    c->fetch_ctas_last = ctas;
    gather_launch(c, kv, ctas, (const uint4 *)host_layer_d(kv, layer), (const int32_t *)d, (const int32_t *)d + n, total, ppu,
                  (long long)kv->layer_off[layer], (long long)kv->total_units, NULL);
    OKV_LAUNCHED("kv_fetch gather kernel");
    if ((st = okv_cuda_ring_commit(c, c->copy)) != OKV_OK)
        return st;
    return fetch_record(c, kv, layer, n);
}

/* Make the compute stream wait for the layer's fetches not yet waited for (an install
 * rewrites the gather list that they may still be reading). */
enum okv_status okv_cuda_kv_fetch_order(struct cuda_ctx *c, okv_bkv *kv, int layer)
{
    const int cnt = kv->fetch_count[layer];
    if (cnt > 0)
        OKV_CU(cudaStreamWaitEvent(c->sel_stream, kv->fetch_ev[fetch_slot(kv, kv->fetch_set[layer], layer, cnt - 1)], 0),
               "install after the layer's fetches");
    return OKV_OK;
}

/* The gather of a list that select_install wrote on the device: the copy stream waits
 * for everything queued on the compute stream (the install, behind the layer's
 * attention), gathers d_count[0] units and resets the count for the next install (d_count[1]:
 * the kernel's CTAs done reading it). The
 * host does not know how many units are missing: the event carries n_bound, the units
 * selected, so a late round counts all its selected units as late. */
enum okv_status okv_cuda_kv_fetch_device(struct cuda_ctx *c, okv_bkv *kv, int layer, const int32_t *d_src,
                                         const int32_t *d_dst, int *d_count, int n_bound)
{
    if (n_bound <= 0)
        return OKV_OK;
    enum okv_status st = OKV_OK;
    if (c->sel_stream != c->stream) {   /* the install ran on the side stream (behind the attention) */
        OKV_CU(cudaEventRecord(c->ev_side_mark, c->sel_stream), "event record");
        OKV_CU(cudaStreamWaitEvent(c->copy, c->ev_side_mark, 0), "copy stream wait");
    } else if ((st = copy_after_compute(c)) != OKV_OK) {
        return st;
    }
    const int ppu = (int)(kv->host_unit_bytes / 16);
    const int ctas = fetch_ctas(c, (size_t)n_bound * ppu * 16);
    c->fetch_ctas_last = ctas;
    gather_launch(c, kv, ctas, (const uint4 *)host_layer_d(kv, layer), d_src, d_dst, 0, ppu, (long long)kv->layer_off[layer],
                  (long long)kv->total_units, d_count);
    OKV_LAUNCHED("kv_fetch gather kernel (device list)");
    return fetch_record(c, kv, layer, n_bound);
}

/* Measures the round before of this layer (the fetches waited for at its previous
 * kv_fetch_wait, complete by now: the compute stream has passed that wait): a fetch
 * that completed after the compute stream reached the wait (ready_ev) made it stall;
 * its units count as late and the longest such wait as the stall. Reported one round
 * late, so totals over many steps are what the GPU did. A measurement that cannot be
 * taken (an event not complete) is skipped, never an error. Then records this round's
 * ready event, makes the compute stream wait for the layer's fetches (never blocking
 * the host) and swaps the event sets. */
static enum okv_status cuda_kv_fetch_wait(okv_backend *be, okv_bkv *kv, int layer, int *pending, double *stall_s)
{
    *pending = 0;
    *stall_s = 0;
    if (layer < 0 || layer >= kv->g.n_layers)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda kv_fetch_wait: bad layer %d", layer);
    struct cuda_ctx *c = CTX(be);
    const int L = kv->g.n_layers;
    const int prev = kv->fetch_set[layer] ^ 1, pc = kv->meas_count[layer];
    if (pc > 0) {
        cudaEvent_t ready = kv->ready_ev[prev * L + layer];
        if (cudaEventQuery(ready) == cudaSuccess) {
            float worst = 0;
            for (int i = 0; i < pc; i++) {
                const int at = fetch_slot(kv, prev, layer, i);
                float ms = 0;
                if (cudaEventQuery(kv->fetch_ev[at]) == cudaSuccess &&
                    cudaEventElapsedTime(&ms, ready, kv->fetch_ev[at]) == cudaSuccess && ms > 0) {
                    *pending += kv->fetch_units[at];
                    worst = ms > worst ? ms : worst;
                }
            }
            *stall_s = worst * 1e-3;
        }
        (void)cudaGetLastError();   /* a query's "not ready" must not reach the next launch check */
        kv->meas_count[layer] = 0;
    }
    const int cnt = kv->fetch_count[layer];
    if (cnt == 0)
        return OKV_OK;
    const int cur = kv->fetch_set[layer];
    OKV_CU(cudaEventRecord(kv->ready_ev[cur * L + layer], c->stream), "kv_fetch_wait ready event");
    /* the copy stream is in order: the last event covers the earlier ones */
    OKV_CU(cudaStreamWaitEvent(c->stream, kv->fetch_ev[fetch_slot(kv, cur, layer, cnt - 1)], 0), "kv_fetch_wait");
    kv->meas_count[layer] = cnt;
    kv->fetch_set[layer] = prev;
    kv->fetch_count[layer] = 0;
    return OKV_OK;
}

/* benchmarks: random K and V for one host block (all layers and heads), written
 * through the mapped alias of the pinned host tier */
static __global__ void host_randomize_k(uint8_t *host, int n_host_blocks, int nkv, size_t unit_elems, int hb,
                                        unsigned long long seed, float scale, bool f8)
{
    const int l = blockIdx.x / nkv, h = blockIdx.x % nkv;
    const size_t u0 = (((size_t)l * n_host_blocks + hb) * nkv + h) * unit_elems;
    for (size_t i = threadIdx.x; i < unit_elems; i += blockDim.x) {
        unsigned long long x = seed ^ ((unsigned long long)blockIdx.x << 32) ^ (i * 0x9e3779b97f4a7c15ull);
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ull;
        x ^= x >> 33;
        float r = (float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
        host_put(host, u0 + i, __float2bfloat16(scale * r), f8);
    }
}

static enum okv_status cuda_kv_host_randomize(okv_backend *be, okv_bkv *kv, int hb, uint64_t seed, float scale)
{
    if (!kv->host || hb < 0 || hb >= kv->g.n_host_blocks)
        return okv_set_error(OKV_ERR_INVALID_ARG, "cuda backend: host block %d out of range", hb);
    struct cuda_ctx *c = CTX(be);
    enum okv_status st = copy_after_compute(c);
    if (st != OKV_OK)
        return st;
    host_randomize_k<<<kv->g.n_layers * kv->g.n_kv_heads, 256, 0, c->copy>>>(
        kv->host_d, kv->g.n_host_blocks, kv->g.n_kv_heads, kv->unit_elems, hb,
        (unsigned long long)seed * 0x9e3779b97f4a7c15ull + (unsigned long long)hb, scale, kv->g.host_fp8);
    OKV_LAUNCHED("host randomize kernel");
    kv_summary_rebuild_k<<<kv->g.n_layers * kv->g.n_kv_heads, 128, 0, c->copy>>>(
        kv->summ, kv->host_d, kv->g.n_host_blocks, kv->g.n_kv_heads, kv->g.head_dim, kv->g.block_size, kv->unit_elems, hb,
        kv->g.block_size, kv->g.host_fp8);
    OKV_LAUNCHED("summary rebuild kernel");
    if (kv->codes && (st = codes_from_host(c, kv, hb)) != OKV_OK)
        return st;
    return compute_after_copy(c);
}

void okv_cuda_fill_kv_ops(struct okv_backend_ops *o)
{
    o->kv_host_randomize = cuda_kv_host_randomize;
    o->kv_alloc = okv_cuda_kv_alloc;
    o->kv_free = okv_cuda_kv_free;
    o->kv_unit_bytes = cuda_kv_unit_bytes;
    o->kv_device_bytes = cuda_kv_device_bytes;
    o->kv_host_bytes = cuda_kv_host_bytes;
    o->kv_host_unit_bytes = cuda_kv_host_unit_bytes;
    o->kv_unit_read = cuda_kv_unit_read;
    o->kv_host_read = cuda_kv_host_read;
    o->kv_summary_read = cuda_kv_summary_read;
    o->kv_summary_rebuild = cuda_kv_summary_rebuild;
    o->kv_fetch = cuda_kv_fetch;
    o->kv_fetch_wait = cuda_kv_fetch_wait;
    o->kv_write = cuda_kv_write;
    o->kv_move = cuda_kv_move;
}
