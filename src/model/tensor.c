/* Tensor dtypes and their conversion to float32.
 *
 * The loops are written per 32-element block with fixed trip counts so the
 * compiler vectorises them; fp16 scales and fp16 payloads use the F16C
 * instructions when the build enables them (-mf16c) and the portable converter
 * in src/util/half.c otherwise. The IQ1-IQ3 formats and their grids are in
 * src/model/iquant.c. */
#include "oasiskv/tensor.h"
#include "model/iquant.h"
#include "model/kquant.h"

#include <stdbool.h>
#include <string.h>

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define OKV_HAVE_F16C 1
#endif

#define QK 32
#define QK_K 256

static inline float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
#ifdef OKV_HAVE_F16C
    return _cvtsh_ss(h);
#else
    return okv_fp16_to_f32(h);
#endif
}

const char *okv_dtype_name(enum okv_dtype t)
{
    switch (t) {
    case OKV_DTYPE_F32: return "f32";
    case OKV_DTYPE_F16: return "f16";
    case OKV_DTYPE_BF16: return "bf16";
    case OKV_DTYPE_Q8_0: return "q8_0";
    case OKV_DTYPE_Q4_0: return "q4_0";
    case OKV_DTYPE_Q4_1: return "q4_1";
    case OKV_DTYPE_Q5_0: return "q5_0";
    case OKV_DTYPE_Q5_1: return "q5_1";
    case OKV_DTYPE_Q2_K: return "q2_k";
    case OKV_DTYPE_Q3_K: return "q3_k";
    case OKV_DTYPE_Q4_K: return "q4_k";
    case OKV_DTYPE_Q5_K: return "q5_k";
    case OKV_DTYPE_Q6_K: return "q6_k";
    case OKV_DTYPE_IQ4_NL: return "iq4_nl";
    case OKV_DTYPE_IQ4_XS: return "iq4_xs";
    case OKV_DTYPE_IQ2_XXS: return "iq2_xxs";
    case OKV_DTYPE_IQ2_XS: return "iq2_xs";
    case OKV_DTYPE_IQ2_S: return "iq2_s";
    case OKV_DTYPE_IQ3_XXS: return "iq3_xxs";
    case OKV_DTYPE_IQ3_S: return "iq3_s";
    case OKV_DTYPE_IQ1_S: return "iq1_s";
    case OKV_DTYPE_IQ1_M: return "iq1_m";
    case OKV_DTYPE_F8_E4M3: return "f8_e4m3";
    case OKV_DTYPE_INT_PACKED: return "int_packed";
    case OKV_DTYPE_COUNT: break;
    }
    return "unknown";
}

/* Bytes per block (0 for the plain types). */
static size_t block_bytes(enum okv_dtype t)
{
    switch (t) {
    case OKV_DTYPE_Q8_0: return 34;
    case OKV_DTYPE_Q4_0: return 18;
    case OKV_DTYPE_Q4_1: return 20;
    case OKV_DTYPE_Q5_0: return 22;
    case OKV_DTYPE_Q5_1: return 24;
    case OKV_DTYPE_Q2_K: return 84;
    case OKV_DTYPE_Q3_K: return 110;
    case OKV_DTYPE_Q4_K: return 144;
    case OKV_DTYPE_Q5_K: return 176;
    case OKV_DTYPE_Q6_K: return 210;
    case OKV_DTYPE_IQ4_NL: return 18;
    case OKV_DTYPE_IQ4_XS: return 136;
    case OKV_DTYPE_IQ2_XXS: return 66;
    case OKV_DTYPE_IQ2_XS: return 74;
    case OKV_DTYPE_IQ2_S: return 82;
    case OKV_DTYPE_IQ3_XXS: return 98;
    case OKV_DTYPE_IQ3_S: return 110;
    case OKV_DTYPE_IQ1_S: return 50;
    case OKV_DTYPE_IQ1_M: return 56;
    default: return 0;
    }
}

int64_t okv_dtype_block(enum okv_dtype t)
{
    switch (t) {
    case OKV_DTYPE_Q8_0: case OKV_DTYPE_Q4_0: case OKV_DTYPE_Q4_1: case OKV_DTYPE_Q5_0: case OKV_DTYPE_Q5_1:
    case OKV_DTYPE_IQ4_NL: return QK;
    case OKV_DTYPE_Q2_K: case OKV_DTYPE_Q3_K: case OKV_DTYPE_Q4_K: case OKV_DTYPE_Q5_K: case OKV_DTYPE_Q6_K:
    case OKV_DTYPE_IQ4_XS: case OKV_DTYPE_IQ2_XXS: case OKV_DTYPE_IQ2_XS: case OKV_DTYPE_IQ2_S: case OKV_DTYPE_IQ3_XXS:
    case OKV_DTYPE_IQ3_S: case OKV_DTYPE_IQ1_S: case OKV_DTYPE_IQ1_M: return QK_K;
    default: return 1;
    }
}

static size_t elem_bytes(enum okv_dtype t)
{
    switch (t) {
    case OKV_DTYPE_F32: return 4;
    case OKV_DTYPE_F16: case OKV_DTYPE_BF16: return 2;
    case OKV_DTYPE_F8_E4M3: return 1;
    default: return 0;
    }
}

size_t okv_dtype_nbytes(enum okv_dtype t, int64_t n)
{
    if (n < 0)
        return 0;
    size_t es = elem_bytes(t);
    if (es)
        return (size_t)n * es;
    return (size_t)(n / okv_dtype_block(t)) * block_bytes(t);
}

int64_t okv_tensor_nelements(const struct okv_tensor_view *t)
{
    if (!t)
        return 0;
    int64_t n = 1;
    for (int d = 0; d < OKV_TENSOR_MAX_DIMS; d++)
        n *= t->ne[d] > 0 ? t->ne[d] : 1;
    return n;
}

static void cvt_f16(const uint8_t *src, int64_t n, float *restrict out)
{
    int64_t i = 0;
#ifdef OKV_HAVE_F16C
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < n; i++)
        out[i] = h2f(src + 2 * i);
}

static void cvt_bf16(const uint8_t *src, int64_t n, float *restrict out)
{
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        uint32_t u;
        memcpy(&h, src + 2 * i, 2);   /* safetensors offsets need not be aligned */
        u = (uint32_t)h << 16;
        memcpy(out + i, &u, 4);
    }
}

static void cvt_q8_0(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 34, out += QK) {
        const float d = h2f(src);
        const int8_t *q = (const int8_t *)(src + 2);
        for (int j = 0; j < QK; j++)
            out[j] = (float)q[j] * d;
    }
}

static void cvt_q4_0(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 18, out += QK) {
        const float d = h2f(src);
        const uint8_t *q = src + 2;
        for (int j = 0; j < QK / 2; j++) {
            out[j] = (float)((int)(q[j] & 15) - 8) * d;
            out[j + QK / 2] = (float)((int)(q[j] >> 4) - 8) * d;
        }
    }
}

static void cvt_q4_1(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 20, out += QK) {
        const float d = h2f(src);
        const float m = h2f(src + 2);
        const uint8_t *q = src + 4;
        for (int j = 0; j < QK / 2; j++) {
            out[j] = (float)(q[j] & 15) * d + m;
            out[j + QK / 2] = (float)(q[j] >> 4) * d + m;
        }
    }
}

/* Q5_0 / Q5_1: {f16 d; [f16 m;] u8 qh[4]; u8 qs[16]}. Element j < 16 takes the low nibble
 * of qs[j], element j + 16 the high one; bit j of the little-endian word qh is the fifth
 * bit of element j. Q5_0: y = (q - 16) d; Q5_1: y = q d + m. */
static void cvt_q5(const uint8_t *src, int64_t nb, bool with_min, float *restrict out)
{
    const size_t bb = with_min ? 24 : 22;
    for (int64_t b = 0; b < nb; b++, src += bb, out += QK) {
        const float d = h2f(src);
        const float m = with_min ? h2f(src + 2) : 0.0f;
        const int off = with_min ? 0 : 16;
        const uint8_t *p = src + (with_min ? 4 : 2);
        const uint32_t qh = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        const uint8_t *q = p + 4;
        for (int j = 0; j < QK / 2; j++) {
            const int lo = (int)(q[j] & 15) | (int)((qh >> j) & 1) << 4;
            const int hi = (int)(q[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            out[j] = (float)(lo - off) * d + m;
            out[j + QK / 2] = (float)(hi - off) * d + m;
        }
    }
}

/* Q4_K: {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}; 8 sub-blocks of 32. Each 64 elements
 * read 32 bytes of qs: the low nibbles are sub-block 2c, the high ones 2c + 1;
 * y = d sc q - dmin mn. Q5_K adds qh[32] before qs: bit 2c of qh[l] is the fifth bit of
 * element l of sub-block 2c, bit 2c + 1 that of sub-block 2c + 1. */
static void cvt_q45_k(const uint8_t *src, int64_t nb, bool five, float *restrict out)
{
    const size_t bb = five ? 176 : 144;
    for (int64_t b = 0; b < nb; b++, src += bb, out += QK_K) {
        const float d = h2f(src), dmin = h2f(src + 2);
        const uint8_t *sc = src + 4;
        const uint8_t *qh = src + 16;
        const uint8_t *q = src + (five ? 48 : 16);
        for (int c = 0; c < 4; c++) {
            int s0, m0, s1, m1;
            okv_kq_scale_min(sc, 2 * c, &s0, &m0);
            okv_kq_scale_min(sc, 2 * c + 1, &s1, &m1);
            const float d0 = d * (float)s0, n0 = dmin * (float)m0, d1 = d * (float)s1, n1 = dmin * (float)m1;
            float *y = out + 64 * c;
            const uint8_t *qc = q + 32 * c;
            for (int l = 0; l < 32; l++) {
                int lo = qc[l] & 15, hi = qc[l] >> 4;
                if (five) {
                    lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                y[l] = d0 * (float)lo - n0;
                y[l + 32] = d1 * (float)hi - n1;
            }
        }
    }
}

/* Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}; 16 sub-blocks of 16. Each half of
 * 128 elements reads 64 bytes of ql, 32 of qh and 8 scales: element l (< 32) of the four
 * quarters takes ql[l] low, ql[l + 32] low, ql[l] high, ql[l + 32] high as its low 4 bits
 * and bits 0-1, 2-3, 4-5, 6-7 of qh[l] as its top two; y = d scale (q - 32). */
static void cvt_q6_k(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 210, out += QK_K) {
        const float d = h2f(src + 208);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = src + 64 * h, *qh = src + 128 + 32 * h;
            const int8_t *sc = (const int8_t *)(src + 192) + 8 * h;
            float *y = out + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

/* Q2_K: {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin}; 16 sub-blocks of 16, each with a
 * 4-bit scale (low nibble) and min (high nibble). Half h's 32 bytes of qs serve four
 * rounds j of 2-bit fields (bits 2j, 2j + 1): bytes 0-15 give sub-block 8h + 2j, bytes
 * 16-31 sub-block 8h + 2j + 1; y = d sc q - dmin mn. */
static void cvt_q2_k(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 84, out += QK_K) {
        const uint8_t *scales = src, *qs = src + 16;
        const float d = h2f(src + 80), dmin = h2f(src + 82);
        for (int h = 0; h < 2; h++) {
            const uint8_t *q = qs + 32 * h;
            for (int j = 0; j < 4; j++) {
                for (int part = 0; part < 2; part++) {
                    const uint8_t s = scales[8 * h + 2 * j + part];
                    const float dl = d * (float)(s & 15), ml = dmin * (float)(s >> 4);
                    float *y = out + 128 * h + 32 * j + 16 * part;
                    for (int l = 0; l < 16; l++)
                        y[l] = dl * (float)((q[16 * part + l] >> (2 * j)) & 3) - ml;
                }
            }
        }
    }
}

/* Q3_K: {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}; 16 sub-blocks of 16 with 6-bit
 * scales stored minus 32: scale i takes its low 4 bits from the low (i < 8) or high
 * (i >= 8) nibble of byte i % 8 and its top 2 from bits 2 (i / 4) of byte 8 + i % 4.
 * The 2-bit fields are laid out as in Q2_K; round r = 4h + j (of 8) reads bit r of
 * hmask[l] as the third bit, subtracting 4 where it is clear: y = d (scale - 32) q. */
static void cvt_q3_k(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 110, out += QK_K) {
        const uint8_t *hm = src, *qs = src + 32, *raw = src + 96;
        const float d = h2f(src + 108);
        int scale[16];
        for (int i = 0; i < 16; i++) {
            const int lo = i < 8 ? raw[i] & 15 : raw[i - 8] >> 4;
            const int hi = (raw[8 + i % 4] >> (2 * (i / 4))) & 3;
            scale[i] = (lo | hi << 4) - 32;
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *q = qs + 32 * h;
            for (int j = 0; j < 4; j++) {
                const int r = 4 * h + j;
                for (int part = 0; part < 2; part++) {
                    const float dl = d * (float)scale[8 * h + 2 * j + part];
                    float *y = out + 128 * h + 32 * j + 16 * part;
                    for (int l = 0; l < 16; l++) {
                        const int k = 16 * part + l;
                        const int v = ((q[k] >> (2 * j)) & 3) - ((hm[k] >> r) & 1 ? 0 : 4);
                        y[l] = dl * (float)v;
                    }
                }
            }
        }
    }
}

/* IQ4_NL and IQ4_XS: 4-bit indices into this fixed table (ggml's kvalues_iq4nl) */
static const int8_t k_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* IQ4_NL: {f16 d; u8 qs[16]}: element j < 16 the low nibble of qs[j], j + 16 the high one; y = d table[q] */
static void cvt_iq4_nl(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 18, out += QK) {
        const float d = h2f(src);
        const uint8_t *q = src + 2;
        for (int j = 0; j < QK / 2; j++) {
            out[j] = d * (float)k_iq4nl[q[j] & 15];
            out[j + QK / 2] = d * (float)k_iq4nl[q[j] >> 4];
        }
    }
}

/* IQ4_XS: {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}: sub-block i (of 8) scales by d (ls - 32), ls
 * its 6 bits: the low 4 from nibble i % 2 of scales_l[i / 2], the top 2 from bits 2i of scales_h; its 32
 * elements as IQ4_NL's from 16 bytes of qs */
static void cvt_iq4_xs(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 136, out += QK_K) {
        const float d = h2f(src);
        const uint16_t sh = (uint16_t)(src[2] | src[3] << 8);
        const uint8_t *sl = src + 4, *q = src + 8;
        for (int i = 0; i < 8; i++) {
            const int ls = ((sl[i / 2] >> (4 * (i % 2))) & 15) | ((sh >> (2 * i)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            const uint8_t *qi = q + 16 * i;
            float *y = out + 32 * i;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)k_iq4nl[qi[j] & 15];
                y[j + 16] = dl * (float)k_iq4nl[qi[j] >> 4];
            }
        }
    }
}

static float scale_at(const struct okv_tensor_scale *s, int64_t i)
{
    const uint8_t *p = s->data;
    switch (s->dtype) {
    case OKV_DTYPE_F16: return h2f(p + 2 * i);
    case OKV_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return okv_bf16_to_f32(h);
    }
    default: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    }
}

/* FP8 E4M3 elements [start, start + n) of a matrix with rows of ne0, each times its scale */
static void cvt_f8(const struct okv_tensor_view *t, int64_t start, int64_t n, float *restrict out)
{
    float lut[256];
    for (int i = 0; i < 256; i++)
        lut[i] = okv_e4m3_to_f32((uint8_t)i);
    const uint8_t *q = (const uint8_t *)t->data;
    const struct okv_tensor_scale *s = &t->scale;
    const int64_t ne0 = t->ne[0];
    for (int64_t i = start; i < start + n;) {
        const int64_t r = i / ne0, c0 = i % ne0;
        int64_t c1 = ne0 < c0 + (start + n - i) ? ne0 : c0 + (start + n - i);   /* to the row's end or the range's */
        for (int64_t c = c0; c < c1;) {
            /* one scale value covers columns [c, ce) */
            const int64_t bc = s->data ? s->block_cols : ne0;
            const int64_t ce = (c / bc + 1) * bc < c1 ? (c / bc + 1) * bc : c1;
            const float sc = s->data ? scale_at(s, (r / s->block_rows) * s->cols + c / bc) : 1.0f;
            for (int64_t k = c; k < ce; k++)
                out[r * ne0 + k - start] = lut[q[r * ne0 + k]] * sc;
            c = ce;
        }
        i += c1 - c0;
    }
}

/* (u >> shift) & mask of the little-endian int32 word w of p */
static inline uint32_t word_bits(const uint8_t *p, int64_t w, int shift, uint32_t mask)
{
    uint32_t x;
    memcpy(&x, p + 4 * w, 4);
    return (x >> shift) & mask;
}

/* INT_PACKED elements [start, start + n): (q - zero) * scale, q and zero signed (stored
 * plus 2^(bits-1)); bits 4 or 8 never straddle a word */
static void cvt_packed(const struct okv_tensor_view *t, int64_t start, int64_t n, float *restrict out)
{
    const struct okv_tensor_scale *s = &t->scale;
    const uint8_t *q = t->data, *z = s->zero;
    const int bits = s->bits, off = 1 << (bits - 1);
    const uint32_t mask = (1u << bits) - 1;
    const int64_t ne0 = t->ne[0];
    for (int64_t i = start; i < start + n;) {   /* a row's stretch at a time, a group's scale and zero once */
        const int64_t r = i / ne0, c0 = i % ne0, c1 = ne0 < c0 + (start + n - i) ? ne0 : c0 + (start + n - i);
        const uint8_t *row = q + 4 * r * s->words_per_row;
        for (int64_t c = c0; c < c1;) {
            const int64_t g = c / s->block_cols, ce = (g + 1) * s->block_cols < c1 ? (g + 1) * s->block_cols : c1;
            const int64_t gi = (r / s->block_rows) * s->cols + g;
            const int zp = z ? (int)word_bits(z, (r * bits / 32) * s->cols + g, (int)(r * bits % 32), mask) - off : 0;
            const float sc = scale_at(s, gi);
            for (int64_t k = c; k < ce; k++)
                out[r * ne0 + k - start] =
                    (float)((int)word_bits(row, k * bits / 32, (int)(k * bits % 32), mask) - off - zp) * sc;
            c = ce;
        }
        i += c1 - c0;
    }
}

/* GPTQ / AWQ elements [start, start + n) of the [out][in] matrix (rows r = outputs, columns
 * c = inputs) from their [in][out]-ordered words (okv_tensor_scale) */
static void cvt_gptq_awq(const struct okv_tensor_view *t, int64_t start, int64_t n, float *restrict out)
{
    static const int awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};   /* output j % 8 sits in this nibble */
    const struct okv_tensor_scale *s = &t->scale;
    const uint8_t *q = t->data, *z = s->zero;
    const int bits = s->bits, per = 32 / bits;
    const uint32_t mask = (1u << bits) - 1;
    const int64_t ne0 = t->ne[0], rows = t->ne[1], zw = rows / per;   /* zero words a group */
    const bool awq = s->layout == OKV_PACK_AWQ;
    for (int64_t i = start; i < start + n; i++) {
        const int64_t r = i / ne0, c = i % ne0;
        int64_t g = c / s->block_cols;
        if (s->g_idx) {
            int32_t gi;
            memcpy(&gi, (const uint8_t *)s->g_idx + 4 * c, 4);
            g = gi;
        }
        const int sh = awq ? bits * awq_nibble[r % 8] : bits * (int)(r % per);
        const int v = awq ? (int)word_bits(q, c * (rows / 8) + r / 8, sh, mask)
                          : (int)word_bits(q, (c / per) * rows + r, bits * (int)(c % per), mask);
        const int zp = (int)word_bits(z, g * zw + r / per, sh, mask) + s->zero_offset;
        out[i - start] = (float)(v - zp) * scale_at(s, g * rows + r);
    }
}

enum okv_status okv_tensor_to_f32(const struct okv_tensor_view *t, int64_t start, int64_t n, float *out)
{
    if (!t || !out || !t->data)
        return okv_set_error(OKV_ERR_INVALID_ARG, "okv_tensor_to_f32: NULL tensor, data or output");
    int64_t total = okv_tensor_nelements(t);
    if (start < 0 || n < 0 || start > total || n > total - start)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tensor '%s': range [%lld, +%lld) outside its %lld elements", t->name,
                             (long long)start, (long long)n, (long long)total);
    if (t->dtype == OKV_DTYPE_INT_PACKED) {
        if (!t->scale.data || (t->scale.bits != 4 && t->scale.bits != 8) || t->scale.block_rows < 1 ||
            t->scale.block_cols < 1)
            return okv_set_error(OKV_ERR_INVALID_ARG, "tensor '%s': packed integers without a valid scale", t->name);
        if (t->scale.layout == OKV_PACK_CT)
            cvt_packed(t, start, n, out);
        else
            cvt_gptq_awq(t, start, n, out);
        return OKV_OK;
    }
    if (okv_dtype_nbytes(t->dtype, start + n) > t->nbytes && t->nbytes)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tensor '%s': range [%lld, +%lld) outside its %zu bytes", t->name,
                             (long long)start, (long long)n, t->nbytes);
    const uint8_t *src = t->data;
    switch (t->dtype) {
    case OKV_DTYPE_F32:
        memcpy(out, src + 4 * start, (size_t)n * 4);
        return OKV_OK;
    case OKV_DTYPE_F16:
        cvt_f16(src + 2 * start, n, out);
        return OKV_OK;
    case OKV_DTYPE_BF16:
        cvt_bf16(src + 2 * start, n, out);
        return OKV_OK;
    case OKV_DTYPE_F8_E4M3:
        cvt_f8(t, start, n, out);
        return OKV_OK;
    case OKV_DTYPE_COUNT:
        return okv_set_error(OKV_ERR_UNSUPPORTED, "tensor '%s': unknown dtype %d", t->name, (int)t->dtype);
    default:
        break;
    }
    const int64_t bk = okv_dtype_block(t->dtype);
    if (start % bk || n % bk)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tensor '%s' (%s): start %lld and count %lld must be multiples of %lld",
                             t->name, okv_dtype_name(t->dtype), (long long)start, (long long)n, (long long)bk);
    src += (size_t)(start / bk) * block_bytes(t->dtype);
    const int64_t nb = n / bk;
    switch (t->dtype) {
    case OKV_DTYPE_Q8_0: cvt_q8_0(src, nb, out); return OKV_OK;
    case OKV_DTYPE_Q4_0: cvt_q4_0(src, nb, out); return OKV_OK;
    case OKV_DTYPE_Q4_1: cvt_q4_1(src, nb, out); return OKV_OK;
    case OKV_DTYPE_Q5_0: cvt_q5(src, nb, false, out); return OKV_OK;
    case OKV_DTYPE_Q5_1: cvt_q5(src, nb, true, out); return OKV_OK;
    case OKV_DTYPE_Q2_K: cvt_q2_k(src, nb, out); return OKV_OK;
    case OKV_DTYPE_Q3_K: cvt_q3_k(src, nb, out); return OKV_OK;
    case OKV_DTYPE_Q4_K: cvt_q45_k(src, nb, false, out); return OKV_OK;
    case OKV_DTYPE_Q5_K: cvt_q45_k(src, nb, true, out); return OKV_OK;
    case OKV_DTYPE_Q6_K: cvt_q6_k(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ4_NL: cvt_iq4_nl(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ4_XS: cvt_iq4_xs(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ2_XXS: okv_iq2_xxs_to_f32(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ2_XS: okv_iq2_xs_to_f32(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ2_S: okv_iq2_s_to_f32(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ3_XXS: okv_iq3_xxs_to_f32(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ3_S: okv_iq3_s_to_f32(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ1_S: okv_iq1_s_to_f32(src, nb, out); return OKV_OK;
    case OKV_DTYPE_IQ1_M: okv_iq1_m_to_f32(src, nb, out); return OKV_OK;
    default: break;
    }
    return okv_set_error(OKV_ERR_UNSUPPORTED, "tensor '%s': unknown dtype %d", t->name, (int)t->dtype);
}
