/* IEEE binary16 and bfloat16 conversions, round to nearest even. */
#include "oasiskv/common.h"

#include <math.h>
#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float okv_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0)
            return u2f(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31)
        return u2f(sign | 0x7f800000u | (man << 13));
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t okv_f32_to_fp16(float f)
{
    uint32_t u = f2u(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t exp = (u >> 23) & 0xff;
    uint32_t man = u & 0x7fffff;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = 1u << (shift - 1);
        uint32_t r = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

float okv_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t okv_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* FP8 E4M3 (OCP 8-bit floating point, the "fn" variant: bias 7, no infinities, one NaN
 * code per sign 0x7f/0xff, largest finite 448, subnormals m * 2^-9). */
uint8_t okv_bf16_to_e4m3(uint16_t b)
{
    const uint8_t sign = (uint8_t)((b >> 8) & 0x80);
    if ((b & 0x7fff) > 0x7f80)
        return (uint8_t)(sign | 0x7f);   /* NaN */
    const float a = fabsf(okv_bf16_to_f32(b));
    if (a >= 448.0f)
        return (uint8_t)(sign | 0x7e);   /* saturate (infinities too) */
    if (a < 0.015625f) {                 /* below 2^-6: subnormal steps of 2^-9; 8 steps is 2^-6, code 0x08 */
        return (uint8_t)(sign | (uint8_t)rintf(a * 512.0f));
    }
    int ex;
    (void)frexpf(a, &ex);                /* a = fr * 2^ex, fr in [0.5, 1) */
    int e = ex - 1;                      /* a in [2^e, 2^(e+1)), e in -6..8 */
    int m = (int)rintf((ldexpf(a, -e) - 1.0f) * 8.0f);   /* exact product (a has 8 significant bits); ties to even */
    if (m == 8) {
        m = 0;
        e++;
    }
    return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | (uint8_t)m);
}

uint8_t okv_f32_to_e4m3(float f) { return okv_bf16_to_e4m3(okv_f32_to_bf16(f)); }

float okv_e4m3_to_f32(uint8_t x)
{
    const int e = (x >> 3) & 15, m = x & 7;
    float v;
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = (float)m * (1.0f / 512.0f);
    else
        v = ldexpf(1.0f + (float)m * 0.125f, e - 7);
    return (x & 0x80) ? -v : v;
}
