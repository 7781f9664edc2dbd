/* Tensor dtypes and their conversion to float32.
 *
 * The loops are written per 32-element block with fixed trip counts so the
 * compiler vectorises them; fp16 scales and fp16 payloads use the F16C
 * instructions when the build enables them (-mf16c) and the portable converter
 * in src/util/half.c otherwise. */
#include "oasiskv/tensor.h"

#include <string.h>

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define OKV_HAVE_F16C 1
#endif

#define QK 32

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
    case OKV_DTYPE_COUNT: break;
    }
    return "unknown";
}

/* Bytes per block of 32 elements (or per element for the plain types). */
static size_t block_bytes(enum okv_dtype t)
{
    switch (t) {
    case OKV_DTYPE_Q8_0: return 34;
    case OKV_DTYPE_Q4_0: return 18;
    case OKV_DTYPE_Q4_1: return 20;
    default: return 0;
    }
}

static size_t elem_bytes(enum okv_dtype t)
{
    switch (t) {
    case OKV_DTYPE_F32: return 4;
    case OKV_DTYPE_F16: case OKV_DTYPE_BF16: return 2;
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
    return (size_t)(n / QK) * block_bytes(t);
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

enum okv_status okv_tensor_to_f32(const struct okv_tensor_view *t, int64_t start, int64_t n, float *out)
{
    if (!t || !out || !t->data)
        return okv_set_error(OKV_ERR_INVALID_ARG, "okv_tensor_to_f32: NULL tensor, data or output");
    int64_t total = okv_tensor_nelements(t);
    if (start < 0 || n < 0 || start > total || n > total - start)
        return okv_set_error(OKV_ERR_INVALID_ARG, "tensor '%s': range [%lld, +%lld) outside its %lld elements", t->name,
                             (long long)start, (long long)n, (long long)total);
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
    case OKV_DTYPE_Q8_0:
    case OKV_DTYPE_Q4_0:
    case OKV_DTYPE_Q4_1:
        if (start % QK || n % QK)
            return okv_set_error(OKV_ERR_INVALID_ARG, "tensor '%s' (%s): start %lld and count %lld must be multiples of 32",
                                 t->name, okv_dtype_name(t->dtype), (long long)start, (long long)n);
        src += (size_t)(start / QK) * block_bytes(t->dtype);
        if (t->dtype == OKV_DTYPE_Q8_0)
            cvt_q8_0(src, n / QK, out);
        else if (t->dtype == OKV_DTYPE_Q4_0)
            cvt_q4_0(src, n / QK, out);
        else
            cvt_q4_1(src, n / QK, out);
        return OKV_OK;
    case OKV_DTYPE_COUNT:
        break;
    }
    return okv_set_error(OKV_ERR_UNSUPPORTED, "tensor '%s': unknown dtype %d", t->name, (int)t->dtype);
}
