/* GGUF's IQ1-IQ3 block formats to float32.
 *
 * These formats quantize groups of 8 elements (4 for IQ3's grids) jointly: a group stores
 * an index into a fixed lattice grid of value patterns (src/model/iq_grids.c), and,
 * except in IQ1, the signs separately: 8 sign bits, or a 7-bit index into okv_iq_ksigns
 * whose eighth bit is implied (the number of negatives is even). Every format is a
 * super-block of 256 elements with one fp16 scale d and small per-sub-block scales.
 * Multi-byte fields are little-endian. Below, "byte" offsets are from the block's start;
 * element e of the super-block is out[e]; a "group" is 8 consecutive elements.
 *
 * The arithmetic is float32 in the order llama.cpp's gguf-py (gguf/quants.py) computes it,
 * so that the results equal its dequantization bit for bit (tests/py/check_gguf_quants.py):
 * the sub-block scale first (d times a small integer, then any power-of-two factor), then
 * the scale times the grid value (IQ1: times the grid value plus its delta), then the sign.
 *
 * Indices are bit fields exactly as wide as their tables (8 bits for 256 entries, 9 for
 * 512, 10 for 1024, 11 for 2048, 7 for the 128 sign patterns), so any bytes decode without
 * reading outside a table. */
#include "model/iquant.h"
#include "oasiskv/common.h"

#define QK_K 256

static inline uint16_t u16_at(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline float f16_at(const uint8_t *p) { return okv_fp16_to_f32(u16_at(p)); }

/* one group: y[j] = db * (byte j of g), negated where bit j of signs is set */
static inline void group_signed(float *restrict y, float db, uint64_t g, unsigned signs)
{
    for (int j = 0; j < 8; j++) {
        const float v = db * (float)((g >> (8 * j)) & 0xff);
        y[j] = (signs >> j) & 1 ? -v : v;
    }
}

/* one IQ1 group: y[j] = dl * (v_j + delta), v_j the signed byte j of g (-1, 0 or 1) */
static inline void group_iq1(float *restrict y, float dl, uint64_t g, float delta)
{
    for (int j = 0; j < 8; j++) {
        const int v = (int)((g >> (8 * j)) & 0xff);
        y[j] = dl * ((float)(v < 128 ? v : v - 256) + delta);
    }
}

/* IQ2_XXS, 66 bytes: {f16 d; u8 q[64]}; sub-block ib (of 8, 32 elements) owns q[8 ib ..
 * 8 ib + 7]: bytes 0-3 index okv_iq2xxs_grid for its groups 0-3, bytes 4-7 a u32 w whose
 * bits 7l .. 7l + 6 index the signs of group l and whose top 4 bits are the scale s:
 * y = d (0.5 + s) / 4 * grid * sign. */
void okv_iq2_xxs_to_f32(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 66, out += QK_K) {
        const float d = f16_at(src);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = src + 2 + 8 * ib;
            const uint32_t w = u32_at(q + 4);
            const float db = d * (0.5f + (float)(w >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++)
                group_signed(out + 32 * ib + 8 * l, db, okv_iq2xxs_grid[q[l]], okv_iq_ksigns[(w >> (7 * l)) & 127]);
        }
    }
}

/* The 4-bit scale of group g in IQ2_XS / IQ2_S: one per 16 elements, scale k in nibble
 * k % 2 (low first) of sc[k / 2]; the factor is d (0.5 + s) / 4. */
static inline float iq2_scale(float d, const uint8_t *sc, int g)
{
    const int k = g / 2;
    return d * (0.5f + (float)((sc[k / 2] >> (4 * (k % 2))) & 15)) * 0.25f;
}

/* IQ2_XS, 74 bytes: {f16 d; u16 qs[32]; u8 scales[8]}; group g reads qs[g]: its low
 * 9 bits index okv_iq2xs_grid, its top 7 the signs; y = d (0.5 + s) / 4 * grid * sign. */
void okv_iq2_xs_to_f32(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 74, out += QK_K) {
        const float d = f16_at(src);
        const uint8_t *qs = src + 2, *sc = src + 66;
        for (int g = 0; g < 32; g++) {
            const uint16_t w = u16_at(qs + 2 * g);
            group_signed(out + 8 * g, iq2_scale(d, sc, g), okv_iq2xs_grid[w & 511], okv_iq_ksigns[w >> 9]);
        }
    }
}

/* IQ2_S, 82 bytes: {f16 d; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8 scales[8]}; group g's
 * 10-bit index into okv_iq2s_grid is qs[g] plus bits 2 (g % 4) .. +1 of qh[g / 4] as
 * bits 8-9; its 8 sign bits are signs[g]; scales as IQ2_XS's. */
void okv_iq2_s_to_f32(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 82, out += QK_K) {
        const float d = f16_at(src);
        const uint8_t *qs = src + 2, *signs = src + 34, *qh = src + 66, *sc = src + 74;
        for (int g = 0; g < 32; g++) {
            const unsigned idx = qs[g] | ((qh[g / 4] >> (2 * (g % 4))) & 3u) << 8;
            group_signed(out + 8 * g, iq2_scale(d, sc, g), okv_iq2s_grid[idx], signs[g]);
        }
    }
}

/* IQ3_XXS, 98 bytes: {f16 d; u8 qs[64]; u32 w[8]}; each byte of qs indexes
 * okv_iq3xxs_grid for 4 elements (qs[i]: elements 4i .. 4i + 3); sub-block ib (of 8,
 * 32 elements) takes signs and scale from w[ib] as IQ2_XXS does:
 * y = d (0.5 + s) / 2 * grid * sign. */
void okv_iq3_xxs_to_f32(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 98, out += QK_K) {
        const float d = f16_at(src);
        const uint8_t *qs = src + 2;
        for (int ib = 0; ib < 8; ib++) {
            const uint32_t w = u32_at(src + 66 + 4 * ib);
            const float db = d * (0.5f + (float)(w >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++) {
                const int g = 4 * ib + l;
                const uint64_t v = okv_iq3xxs_grid[qs[2 * g]] | (uint64_t)okv_iq3xxs_grid[qs[2 * g + 1]] << 32;
                group_signed(out + 8 * g, db, v, okv_iq_ksigns[(w >> (7 * l)) & 127]);
            }
        }
    }
}

/* IQ3_S, 110 bytes: {f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]}; the 9-bit
 * index of elements 4i .. 4i + 3 into okv_iq3s_grid is qs[i] plus bit i % 8 of qh[i / 8];
 * group g's sign bits are signs[g]; sub-block k (of 8, 32 elements) has the 4-bit scale s
 * in nibble k % 2 of scales[k / 2]: y = d (1 + 2 s) * grid * sign. */
void okv_iq3_s_to_f32(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 110, out += QK_K) {
        const float d = f16_at(src);
        const uint8_t *qs = src + 2, *qh = src + 66, *signs = src + 74, *sc = src + 106;
        for (int k = 0; k < 8; k++) {
            const float db = d * (float)(1 + 2 * ((sc[k / 2] >> (4 * (k % 2))) & 15));
            for (int l = 0; l < 4; l++) {
                const int g = 4 * k + l, i0 = 2 * g, i1 = 2 * g + 1;
                const unsigned x0 = qs[i0] | ((qh[i0 / 8] >> (i0 % 8)) & 1u) << 8;
                const unsigned x1 = qs[i1] | ((qh[i1 / 8] >> (i1 % 8)) & 1u) << 8;
                group_signed(out + 8 * g, db, okv_iq3s_grid[x0] | (uint64_t)okv_iq3s_grid[x1] << 32, signs[g]);
            }
        }
    }
}

/* IQ1's grid values are shifted by +-1/8 (the delta) before scaling */
#define IQ1_DELTA 0.125f

/* IQ1_S, 50 bytes: {f16 d; u8 qs[32]; u16 qh[8]}; sub-block ib (of 8, 32 elements) reads
 * h = qh[ib]: group l (of 4) indexes okv_iq1s_grid with qs[4 ib + l] plus bits 3l .. 3l + 2
 * of h as bits 8-10; bits 12-14 are the scale s, bit 15 the delta's sign (set: negative):
 * y = d (2 s + 1) * (grid + delta). */
void okv_iq1_s_to_f32(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 50, out += QK_K) {
        const float d = f16_at(src);
        const uint8_t *qs = src + 2;
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t h = u16_at(src + 34 + 2 * ib);
            const float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
            const float delta = h & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++) {
                const unsigned idx = qs[4 * ib + l] | ((h >> (3 * l)) & 7u) << 8;
                group_iq1(out + 32 * ib + 8 * l, dl, okv_iq1s_grid[idx], delta);
            }
        }
    }
}

/* IQ1_M, 56 bytes: {u8 qs[32]; u8 qh[16]; u16 sc[4]}, no field of its own for d: its fp16
 * bits are the top nibbles of sc[0] (bits 0-3) .. sc[3] (bits 12-15). Group g (of 32) takes
 * nibble g % 2 (low first) of qh[g / 2]: bits 0-2 extend qs[g] to an 11-bit index into
 * okv_iq1s_grid, bit 3 is the delta's sign; each 16 elements k (of 16) have a 3-bit scale s
 * at bits 3 (k % 4) of sc[k / 4]: y = d (2 s + 1) * (grid + delta). */
void okv_iq1_m_to_f32(const uint8_t *src, int64_t nb, float *restrict out)
{
    for (int64_t b = 0; b < nb; b++, src += 56, out += QK_K) {
        const uint8_t *qs = src, *qh = src + 32;
        uint16_t sc[4];
        for (int i = 0; i < 4; i++)
            sc[i] = u16_at(src + 48 + 2 * i);
        const uint16_t dbits = (uint16_t)(sc[0] >> 12 | (sc[1] >> 12) << 4 | (sc[2] >> 12) << 8 | (sc[3] >> 12) << 12);
        const float d = okv_fp16_to_f32(dbits);
        for (int k = 0; k < 16; k++) {
            const float dl = d * (float)(2 * ((sc[k / 4] >> (3 * (k % 4))) & 7) + 1);
            for (int m = 0; m < 2; m++) {
                const int g = 2 * k + m;
                const unsigned nib = (qh[k] >> (4 * m)) & 15u;   /* g / 2 == k, g % 2 == m */
                const unsigned idx = qs[g] | (nib & 7u) << 8;
                group_iq1(out + 8 * g, dl, okv_iq1s_grid[idx], nib & 8 ? -IQ1_DELTA : IQ1_DELTA);
            }
        }
    }
}
