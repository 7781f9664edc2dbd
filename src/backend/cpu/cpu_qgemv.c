/* Decode-shaped projections (1 to OKV_CPU_QGEMV_ROWS rows) read straight from the weight's
 * stored format: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (GGUF blocks of 32), Q4_K, Q5_K, Q6_K (blocks of
 * 256, read 32 weights at a time), F16 and BF16, instead of the fp32 copy that prefill's
 * sgemm uses (Q2_K and Q3_K weights take that path at decode too). A decode step reads every weight once, so its time is
 * the weight bytes over memory bandwidth: Q4_1 is 5 bits a weight against fp32's 32.
 *
 * Each block is dequantised in registers with the loader's formula (q d + m, (q - 8) d,
 * q d; f16 and bf16 widened exactly) and multiplied into fp32 accumulators, 8 lanes at a
 * time, in a fixed order: the results differ from the fp32 path's only by the order of
 * the sums (tests/test_cpu_qgemv.c bounds it). */
#include "backend/cpu/cpu_internal.h"
#include "model/kquant.h"

#include <string.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

bool okv_cpu_qgemv_type(enum okv_dtype t)
{
    switch (t) {
    case OKV_DTYPE_Q8_0: case OKV_DTYPE_Q4_0: case OKV_DTYPE_Q4_1: case OKV_DTYPE_Q5_0: case OKV_DTYPE_Q5_1:
    case OKV_DTYPE_Q4_K: case OKV_DTYPE_Q5_K: case OKV_DTYPE_Q6_K: case OKV_DTYPE_F16: case OKV_DTYPE_BF16:
        return true;
    default:
        return false;
    }
}

#ifdef __AVX2__
static inline float h2f_c(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 32 unsigned bytes as four vectors of 8 floats, in order */
static inline __attribute__((always_inline)) void bytes_to_f32(__m256i q, __m256 f[4])
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
    f[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    f[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
}

/* bit i of x as byte i: 0x10 where set, 0 where clear (the fifth bit of a Q5 weight) */
static inline __attribute__((always_inline)) __m256i bits_to_0x10(uint32_t x)
{
    const __m256i sh = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                                        3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)x), sh), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

/* the block's 32 weights as four vectors of 8 (written out: the compiler keeps them in
 * registers); for the K formats, weights 32 blk .. 32 blk + 31 of the row */
static inline __attribute__((always_inline)) void block_v(enum okv_dtype t, const uint8_t *row, int64_t blk, __m256 w[4])
{
    switch (t) {
    case OKV_DTYPE_Q8_0: {
        const uint8_t *b = row + blk * 34;
        const __m256 d = _mm256_set1_ps(h2f_c(b));
        w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2)))), d);
        w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 10)))), d);
        w[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 18)))), d);
        w[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 26)))), d);
        break;
    }
    case OKV_DTYPE_Q4_0:
    case OKV_DTYPE_Q4_1: {
        const bool q41 = t == OKV_DTYPE_Q4_1;
        const uint8_t *b = row + blk * (q41 ? 20 : 18);
        const __m256 d = _mm256_set1_ps(h2f_c(b));
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + (q41 ? 4 : 2)));
        const __m128i mask = _mm_set1_epi8(15);
        const __m128i lo = _mm_and_si128(qs, mask), hi = _mm_and_si128(_mm_srli_epi16(qs, 4), mask);
        const __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
        const __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
        const __m256 f2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
        const __m256 f3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
        if (q41) {
            const __m256 m = _mm256_set1_ps(h2f_c(b + 2));
            w[0] = _mm256_fmadd_ps(f0, d, m);
            w[1] = _mm256_fmadd_ps(f1, d, m);
            w[2] = _mm256_fmadd_ps(f2, d, m);
            w[3] = _mm256_fmadd_ps(f3, d, m);
        } else {   /* (q - 8) d */
            const __m256 eight = _mm256_set1_ps(8.0f);
            w[0] = _mm256_mul_ps(_mm256_sub_ps(f0, eight), d);
            w[1] = _mm256_mul_ps(_mm256_sub_ps(f1, eight), d);
            w[2] = _mm256_mul_ps(_mm256_sub_ps(f2, eight), d);
            w[3] = _mm256_mul_ps(_mm256_sub_ps(f3, eight), d);
        }
        break;
    }
    case OKV_DTYPE_Q5_0:
    case OKV_DTYPE_Q5_1: {
        const bool q51 = t == OKV_DTYPE_Q5_1;
        const uint8_t *b = row + blk * (q51 ? 24 : 22);
        const __m256 d = _mm256_set1_ps(h2f_c(b));
        const uint8_t *p = b + (q51 ? 4 : 2);
        uint32_t qh;
        memcpy(&qh, p, 4);
        const __m128i qs = _mm_loadu_si128((const __m128i *)(p + 4));
        const __m128i mask = _mm_set1_epi8(15);
        const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), _mm_and_si128(qs, mask));
        __m256 f[4];
        bytes_to_f32(_mm256_or_si256(nib, bits_to_0x10(qh)), f);
        if (q51) {   /* written out, as everywhere here: a loop kept w[] on the stack */
            const __m256 m = _mm256_set1_ps(h2f_c(b + 2));
            w[0] = _mm256_fmadd_ps(f[0], d, m);
            w[1] = _mm256_fmadd_ps(f[1], d, m);
            w[2] = _mm256_fmadd_ps(f[2], d, m);
            w[3] = _mm256_fmadd_ps(f[3], d, m);
        } else {   /* (q - 16) d */
            const __m256 sixteen = _mm256_set1_ps(16.0f);
            w[0] = _mm256_mul_ps(_mm256_sub_ps(f[0], sixteen), d);
            w[1] = _mm256_mul_ps(_mm256_sub_ps(f[1], sixteen), d);
            w[2] = _mm256_mul_ps(_mm256_sub_ps(f[2], sixteen), d);
            w[3] = _mm256_mul_ps(_mm256_sub_ps(f[3], sixteen), d);
        }
        break;
    }
    case OKV_DTYPE_Q4_K:
    case OKV_DTYPE_Q5_K: {
        /* sub-block j of the super-block: nibble j & 1 of the 32 bytes of quarter j / 2 */
        const bool five = t == OKV_DTYPE_Q5_K;
        const uint8_t *b = row + (blk >> 3) * (five ? 176 : 144);
        const int j = (int)(blk & 7), c = j >> 1, hi = j & 1;
        int sc, mn;
        okv_kq_scale_min(b + 4, j, &sc, &mn);
        const __m256 d = _mm256_set1_ps(h2f_c(b) * (float)sc), m = _mm256_set1_ps(h2f_c(b + 2) * (float)mn);
        __m256i q = _mm256_loadu_si256((const __m256i *)(b + (five ? 48 : 16) + 32 * c));
        q = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(4 * hi)), _mm256_set1_epi8(15));
        if (five) {   /* bit j of qh[l] is the fifth bit of weight l */
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
            const __m256i h5 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
            q = _mm256_or_si256(q, _mm256_slli_epi16(h5, 4));
        }
        __m256 f[4];
        bytes_to_f32(q, f);
        w[0] = _mm256_fmsub_ps(f[0], d, m);
        w[1] = _mm256_fmsub_ps(f[1], d, m);
        w[2] = _mm256_fmsub_ps(f[2], d, m);
        w[3] = _mm256_fmsub_ps(f[3], d, m);
        break;
    }
    case OKV_DTYPE_Q6_K: {
        /* run r of 32 (of 8): half r / 4; quarter qq = r % 4 takes the low (qq < 2) or high
         * nibbles of ql[32 (qq & 1) ..], bits 2 qq, 2 qq + 1 of qh[l], and two scales */
        const uint8_t *b = row + (blk >> 3) * 210;
        const int r = (int)(blk & 7), h = r >> 2, qq = r & 3;
        __m256i q = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32 * (qq & 1)));
        q = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(qq >= 2 ? 4 : 0)), _mm256_set1_epi8(15));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
        const __m256i h2 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * qq)), _mm256_set1_epi8(3));
        q = _mm256_or_si256(q, _mm256_slli_epi16(h2, 4));
        const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + 2 * qq;
        const float d = h2f_c(b + 208);
        const __m256 da = _mm256_set1_ps(d * (float)sc[0]), db = _mm256_set1_ps(d * (float)sc[1]);
        const __m256 c32 = _mm256_set1_ps(32.0f);
        __m256 f[4];
        bytes_to_f32(q, f);
        w[0] = _mm256_mul_ps(_mm256_sub_ps(f[0], c32), da);
        w[1] = _mm256_mul_ps(_mm256_sub_ps(f[1], c32), da);
        w[2] = _mm256_mul_ps(_mm256_sub_ps(f[2], c32), db);
        w[3] = _mm256_mul_ps(_mm256_sub_ps(f[3], c32), db);
        break;
    }
    case OKV_DTYPE_F16: {
        const uint8_t *p = row + blk * 64;
        w[0] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        w[1] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
        w[2] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 32)));
        w[3] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 48)));
        break;
    }
    case OKV_DTYPE_BF16: {
        const uint8_t *p = row + blk * 64;
        w[0] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
        w[1] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 16))), 16));
        w[2] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 32))), 16));
        w[3] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 48))), 16));
        break;
    }
    default:
        w[0] = w[1] = w[2] = w[3] = _mm256_setzero_ps();
        break;
    }
}

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_hadd_ps(s, s);
    s = _mm_hadd_ps(s, s);
    return _mm_cvtss_f32(s);
}
#endif

#ifdef __AVX2__
/* rows [r0, r1) for N input rows (N a constant after inlining: the accumulators stay in
 * registers); two rows of the weight at a time share the loads of x */
static inline __attribute__((always_inline)) void qgemv_n(const okv_bweight *w, enum okv_dtype qt, const float *x, int N,
                                                          int m, int r0, int r1, float *out)
{
    const int64_t k = w->row_len, nblk = k / 32;
    const size_t rb = w->q_row_bytes;
    int r = r0;
    for (; r + 1 < r1; r += 2) {
        const uint8_t *ra = w->q + (size_t)r * rb, *rbp = ra + rb;
        __m256 a0[OKV_CPU_QGEMV_ROWS], a1[OKV_CPU_QGEMV_ROWS];
        for (int t = 0; t < N; t++)
            a0[t] = a1[t] = _mm256_setzero_ps();
        const size_t bb = rb / (size_t)nblk;   /* bytes a block */
        for (int64_t b = 0; b < nblk; b++) {
            __m256 wa[4], wb[4];
            /* two pairs of rows ahead, a block at a time: with the hardware prefetcher alone
             * the blocks' loads waited on memory (SmolLM2 Q4_1 decode 48 -> 60 tok/s) */
            _mm_prefetch((const char *)(ra + 4 * rb + (size_t)b * bb), _MM_HINT_T0);
            _mm_prefetch((const char *)(rbp + 4 * rb + (size_t)b * bb), _MM_HINT_T0);
            block_v(qt, ra, b, wa);
            block_v(qt, rbp, b, wb);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) {
                const float *xb = x + (size_t)t * k + b * 32;
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    const __m256 xv = _mm256_loadu_ps(xb + 8 * i);
                    a0[t] = _mm256_fmadd_ps(wa[i], xv, a0[t]);
                    a1[t] = _mm256_fmadd_ps(wb[i], xv, a1[t]);
                }
            }
        }
        for (int t = 0; t < N; t++) {
            out[(size_t)t * m + r] = hsum(a0[t]);
            out[(size_t)t * m + r + 1] = hsum(a1[t]);
        }
    }
    for (; r < r1; r++) {
        const uint8_t *ra = w->q + (size_t)r * rb;
        __m256 a0[OKV_CPU_QGEMV_ROWS];
        for (int t = 0; t < N; t++)
            a0[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nblk; b++) {
            __m256 wa[4];
            block_v(qt, ra, b, wa);
            for (int t = 0; t < N; t++) {
                const float *xb = x + (size_t)t * k + b * 32;
                for (int i = 0; i < 4; i++)
                    a0[t] = _mm256_fmadd_ps(wa[i], _mm256_loadu_ps(xb + 8 * i), a0[t]);
            }
        }
        for (int t = 0; t < N; t++)
            out[(size_t)t * m + r] = hsum(a0[t]);
    }
}
#endif

void okv_cpu_qgemv(const okv_bweight *w, const float *x, int n, int m, int r0, int r1, float *out)
{
#ifdef __AVX2__
    /* each (format, rows) pair its own code: the block decode and the row loops unrolled */
#define QG_ROWS(QT)                                                                                                      \
    switch (n) {                                                                                                       \
    case 1: qgemv_n(w, QT, x, 1, m, r0, r1, out); return;                                                              \
    case 2: qgemv_n(w, QT, x, 2, m, r0, r1, out); return;                                                              \
    case 3: qgemv_n(w, QT, x, 3, m, r0, r1, out); return;                                                              \
    default: qgemv_n(w, QT, x, 4, m, r0, r1, out); return;                                                             \
    }
    switch (w->qtype) {
    case OKV_DTYPE_Q8_0: QG_ROWS(OKV_DTYPE_Q8_0)
    case OKV_DTYPE_Q4_0: QG_ROWS(OKV_DTYPE_Q4_0)
    case OKV_DTYPE_Q4_1: QG_ROWS(OKV_DTYPE_Q4_1)
    case OKV_DTYPE_Q5_0: QG_ROWS(OKV_DTYPE_Q5_0)
    case OKV_DTYPE_Q5_1: QG_ROWS(OKV_DTYPE_Q5_1)
    case OKV_DTYPE_Q4_K: QG_ROWS(OKV_DTYPE_Q4_K)
    case OKV_DTYPE_Q5_K: QG_ROWS(OKV_DTYPE_Q5_K)
    case OKV_DTYPE_Q6_K: QG_ROWS(OKV_DTYPE_Q6_K)
    case OKV_DTYPE_F16: QG_ROWS(OKV_DTYPE_F16)
    default: QG_ROWS(OKV_DTYPE_BF16)
    }
#undef QG_ROWS
#else
    /* without AVX2: each row dequantised by the loader's own conversion, then plain dots */
    const int64_t k = w->row_len;
    float *wr = okv_malloc(sizeof(float) * (size_t)k, OKV_TAG_BACKEND);
    for (int r = r0; r < r1 && wr; r++) {
        const struct okv_tensor_view v = {.dtype = w->qtype, .n_dims = 1, .ne = {k, 1, 1, 1},
                                          .data = w->q + (size_t)r * w->q_row_bytes, .nbytes = w->q_row_bytes};
        okv_tensor_to_f32(&v, 0, k, wr);
        for (int t = 0; t < n; t++) {
            float acc = 0;
            for (int64_t i = 0; i < k; i++)
                acc += wr[i] * x[(size_t)t * k + i];
            out[(size_t)t * m + r] = acc;
        }
    }
    okv_free(wr);
#endif
}
