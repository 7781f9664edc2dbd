/* Views of weight tensors as stored in a model file, and their conversion to
 * float32. A view borrows its data (a file mapping); it owns nothing. */
#ifndef OASISKV_TENSOR_H
#define OASISKV_TENSOR_H

#include "oasiskv/common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum okv_dtype {
    OKV_DTYPE_F32 = 0,
    OKV_DTYPE_F16,
    OKV_DTYPE_BF16,
    OKV_DTYPE_Q8_0,   /* blocks of 32: {f16 d; i8 qs[32]}, y = qs*d */
    OKV_DTYPE_Q4_0,   /* blocks of 32: {f16 d; u8 qs[16]}, y[j] = ((qs[j]&15)-8)*d, y[j+16] = ((qs[j]>>4)-8)*d */
    OKV_DTYPE_Q4_1,   /* blocks of 32: {f16 d; f16 m; u8 qs[16]}, y[j] = (qs[j]&15)*d+m, y[j+16] = (qs[j]>>4)*d+m */
    /* the other GGUF (ggml) block formats that llama.cpp's usual presets write (Q2_K .. Q6_K,
     * Q4_K_M, Q5_K_M, ...); layouts and formulas in src/model/tensor.c */
    OKV_DTYPE_Q5_0,   /* blocks of 32, 22 bytes: 5-bit q - 16, one f16 scale */
    OKV_DTYPE_Q5_1,   /* blocks of 32, 24 bytes: 5-bit q, f16 scale and offset */
    OKV_DTYPE_Q2_K,   /* super-blocks of 256, 84 bytes: 2-bit q, 4-bit scales and mins of 16 */
    OKV_DTYPE_Q3_K,   /* super-blocks of 256, 110 bytes: 3-bit q, 6-bit scales of 16 */
    OKV_DTYPE_Q4_K,   /* super-blocks of 256, 144 bytes: 4-bit q, 6-bit scales and mins of 32 */
    OKV_DTYPE_Q5_K,   /* super-blocks of 256, 176 bytes: 5-bit q, 6-bit scales and mins of 32 */
    OKV_DTYPE_Q6_K,   /* super-blocks of 256, 210 bytes: 6-bit q - 32, 8-bit scales of 16 */
    OKV_DTYPE_IQ4_NL, /* blocks of 32, 18 bytes: f16 scale, 4-bit indices into a fixed non-linear table */
    OKV_DTYPE_IQ4_XS, /* super-blocks of 256, 136 bytes: IQ4_NL's table with 6-bit scales of 32 */
    /* the IQ1-IQ3 "i-quants": groups of 8 (IQ3: 4) elements as an index into a fixed lattice grid,
     * signs stored apart (IQ1: in the grid); layouts in src/model/iquant.c, grids in src/model/iq_grids.c */
    OKV_DTYPE_IQ2_XXS, /* super-blocks of 256, 66 bytes: 8-bit grid indices, 7-bit sign indices, 4-bit scales of 32 */
    OKV_DTYPE_IQ2_XS,  /* super-blocks of 256, 74 bytes: 9-bit grid indices, 7-bit sign indices, 4-bit scales of 16 */
    OKV_DTYPE_IQ2_S,   /* super-blocks of 256, 82 bytes: 10-bit grid indices, 8 sign bits, 4-bit scales of 16 */
    OKV_DTYPE_IQ3_XXS, /* super-blocks of 256, 98 bytes: 8-bit indices of 4, 7-bit sign indices, 4-bit scales of 32 */
    OKV_DTYPE_IQ3_S,   /* super-blocks of 256, 110 bytes: 9-bit indices of 4, 8 sign bits, 4-bit scales of 32 */
    OKV_DTYPE_IQ1_S,   /* super-blocks of 256, 50 bytes: 11-bit indices into a grid of -1/0/1, 3-bit scales of 32 */
    OKV_DTYPE_IQ1_M,   /* super-blocks of 256, 56 bytes: IQ1_S's grid, 3-bit scales of 16, f16 scale in 4 nibbles */
    OKV_DTYPE_F8_E4M3, /* one byte an element (OCP E4M3, "fn": no infinities), times the view's scale grid */
    OKV_DTYPE_INT_PACKED, /* integers packed in little-endian int32 words (compressed-tensors pack-quantized,
                             GPTQ, AWQ): (q - zero) times the scale grid; the layout in okv_tensor_scale */
    OKV_DTYPE_COUNT
};

#define OKV_TENSOR_MAX_DIMS 4
#define OKV_TENSOR_NAME_MAX 128

/* How a tensor-parallel backend splits a weight over its ranks (other backends
 * ignore it). OUT_*: rows of the [out][in] matrix (and a bias's elements), so each
 * rank computes a slice of the outputs; IN_*: columns, so each rank reads a slice of
 * the inputs and the partial outputs are summed (all-reduce). Q: by query heads,
 * KV: by KV heads (replicated when there are fewer KV heads than ranks), FFN: by the
 * intermediate dimension, VOCAB: by vocabulary rows. */
enum okv_shard {
    OKV_SHARD_NONE = 0,   /* replicated */
    OKV_SHARD_OUT_Q,
    OKV_SHARD_OUT_KV,
    OKV_SHARD_OUT_FFN,
    OKV_SHARD_OUT_VOCAB,
    OKV_SHARD_IN_Q,
    OKV_SHARD_IN_FFN,
};

/* The scale of an FP8 weight (Hugging Face "fp8", compressed-tensors and fbgemm FP8
 * checkpoints: a "<name>_scale_inv" or "<name>_scale" tensor beside it): element (r, c) of
 * the [rows][cols] matrix is e4m3(q) * grid[r / block_rows][c / block_cols]. A per-tensor
 * scale is a 1 x 1 grid, a per-channel one rows x 1, a 128 x 128-block one
 * ceil(rows / 128) x ceil(cols / 128). */
struct okv_tensor_scale {
    const void *data;                  /* borrowed; NULL: no scale (other dtypes) */
    enum okv_dtype dtype;              /* F32, F16 or BF16 */
    int64_t rows, cols;                /* the grid's shape */
    int64_t block_rows, block_cols;    /* elements of the matrix each grid value covers */
    /* INT_PACKED only: element c of row r is bits (4 or 8) wide at bit c * bits of the row's
     * words (words_per_row int32 each), stored plus 2^(bits-1); the zero points, when the
     * quantization is asymmetric, are packed the same way down each column of the grid
     * (int32 words [ceil(rows * bits / 32)][grid cols]), NULL when symmetric. */
    int bits;
    int64_t words_per_row;
    const void *zero;
    /* the layout of the words: compressed-tensors (above), or GPTQ / AWQ, whose matrices are
     * stored [in][out] (transposed): GPTQ's qweight packs 32 / bits inputs of one output a word
     * ([in * bits / 32][out]), AWQ's 8 outputs of one input ([in][out / 8], nibbles in the order
     * 0 2 4 6 1 3 5 7); both pack their zero points along the outputs ([groups][out * bits /
     * 32]), GPTQ's stored minus one ("gptq" v1 checkpoints), and scale by [groups][out]; GPTQ's
     * group of input i is g_idx[i] (activation order) when g_idx is given, else i / group. */
    int layout;                        /* enum okv_pack_layout */
    const void *g_idx;                 /* GPTQ: int32 [in], NULL: i / block_cols */
    int zero_offset;                   /* added to the stored zero points (GPTQ v1: 1) */
};

enum okv_pack_layout { OKV_PACK_CT = 0, OKV_PACK_GPTQ, OKV_PACK_AWQ };

struct okv_tensor_view {
    char name[OKV_TENSOR_NAME_MAX];
    enum okv_shard shard;              /* set by the engine before loading; files leave it NONE */
    enum okv_dtype dtype;
    int n_dims;
    int64_t ne[OKV_TENSOR_MAX_DIMS];  /* ne[0] innermost (row length); unused dims are 1 */
    const void *data;                  /* borrowed; NULL when the tensor is absent */
    size_t nbytes;
    struct okv_tensor_scale scale;     /* F8_E4M3 only */
};

const char *okv_dtype_name(enum okv_dtype t);
/* Elements a block of dtype t holds: 1 for F32/F16/BF16, 32 for Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL,
 * 256 for the K formats, IQ4_XS and IQ1-IQ3. Rows of a block type are whole blocks. */
int64_t okv_dtype_block(enum okv_dtype t);
/* Bytes of n elements of dtype t (n must be a multiple of okv_dtype_block(t)). */
size_t okv_dtype_nbytes(enum okv_dtype t, int64_t n);
int64_t okv_tensor_nelements(const struct okv_tensor_view *t);

/* Convert elements [start, start+n) of the tensor (flat index) to float32.
 * For block types start and n must be multiples of okv_dtype_block (rows always are). */
enum okv_status okv_tensor_to_f32(const struct okv_tensor_view *t, int64_t start, int64_t n, float *out);

#ifdef __cplusplus
}
#endif
#endif
