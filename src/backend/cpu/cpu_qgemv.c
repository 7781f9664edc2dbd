/* Decode-shaped projections (1 to OKV_CPU_QGEMV_ROWS rows) read straight from the weight's
 * stored format: Q8_0, Q4_0, Q4_1 (GGUF blocks of 32), F16 and BF16, instead of the fp32
 * copy that prefill's sgemm uses. A decode step reads every weight once, so its time is
 * the weight bytes over memory bandwidth: Q4_1 is 5 bits a weight against fp32's 32.
 *
 * Each block is dequantised in registers with the loader's formula (q d + m, (q - 8) d,
 * q d; f16 and bf16 widened exactly) and multiplied into fp32 accumulators, 8 lanes at a
 * time, in a fixed order: the results differ from the fp32 path's only by the order of
 * the sums (tests/test_cpu_qgemv.c bounds it). */
#include "backend/cpu/cpu_internal.h"

#include <string.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

bool okv_cpu_qgemv_type(enum okv_dtype t)
{
    return t == OKV_DTYPE_Q8_0 || t == OKV_DTYPE_Q4_0 || t == OKV_DTYPE_Q4_1 || t == OKV_DTYPE_F16 || t == OKV_DTYPE_BF16;
}

#ifdef __AVX2__
static inline float h2f_c(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* the block's 32 weights as four vectors of 8 (written out: the compiler keeps them in
 * registers) */
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
