/* GGUF's IQ1-IQ3 block formats ("i-quants" on lattice grids): their conversion to float32
 * (src/model/iquant.c, which describes each layout) and the tables they index
 * (src/model/iq_grids.c, generated from the `gguf` package by scripts/gen_iq_grids.py).
 * Internal to the model loader; okv_tensor_to_f32 (src/model/tensor.c) dispatches here. */
#ifndef OKV_MODEL_IQUANT_H
#define OKV_MODEL_IQUANT_H

#include <stdint.h>

/* Each converts nb consecutive super-blocks of 256 elements at src to 256 * nb floats.
 * Every bit pattern of a block decodes (grid and sign indices are masked to their
 * tables' sizes); the result is finite when the block's fp16 scale is. */
void okv_iq2_xxs_to_f32(const uint8_t *src, int64_t nb, float *restrict out);
void okv_iq2_xs_to_f32(const uint8_t *src, int64_t nb, float *restrict out);
void okv_iq2_s_to_f32(const uint8_t *src, int64_t nb, float *restrict out);
void okv_iq3_xxs_to_f32(const uint8_t *src, int64_t nb, float *restrict out);
void okv_iq3_s_to_f32(const uint8_t *src, int64_t nb, float *restrict out);
void okv_iq1_s_to_f32(const uint8_t *src, int64_t nb, float *restrict out);
void okv_iq1_m_to_f32(const uint8_t *src, int64_t nb, float *restrict out);

/* The tables (iq_grids.c). A grid entry packs a group of element values, element j in
 * bits 8j .. 8j + 7: 8 unsigned values for IQ2 (8, 25, 43), 4 for IQ3 (IQ3_XXS 4 .. 62,
 * IQ3_S 1 .. 15), 8 signed bytes for IQ1 (-1, 0, +1). */
extern const uint8_t okv_iq_ksigns[128];   /* 8 sign bits (set: negative) from a 7-bit index */
extern const uint64_t okv_iq2xxs_grid[256];
extern const uint64_t okv_iq2xs_grid[512];
extern const uint64_t okv_iq2s_grid[1024];
extern const uint32_t okv_iq3xxs_grid[256];
extern const uint32_t okv_iq3s_grid[512];
extern const uint64_t okv_iq1s_grid[2048];   /* IQ1_S and IQ1_M */

#endif
