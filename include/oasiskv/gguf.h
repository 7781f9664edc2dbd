/* GGUF v3 reader (little-endian, packed).
 *
 * Layout: magic "GGUF" (u32 0x46554747), u32 version, u64 tensor_count, u64 kv_count;
 * kv_count pairs (string key, u32 type, value); tensor_count infos (string name,
 * u32 n_dims, u64 ne[n_dims] with ne[0] innermost, u32 ggml type, u64 offset);
 * the data section starts at the next multiple of general.alignment (default 32).
 * A string is a u64 length and bytes without NUL. Arrays are u32 element type,
 * u64 count, elements.
 *
 * The file is memory-mapped; okv_gguf_open validates every length and offset
 * against the file size, so a truncated or corrupt file is an OKV_ERR_FORMAT with
 * a message naming the file and the field, never a crash. Returned pointers point
 * into the mapping and stay valid until okv_gguf_close. */
#ifndef OASISKV_GGUF_H
#define OASISKV_GGUF_H

#include "oasiskv/common.h"
#include "oasiskv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

enum okv_gguf_type {
    OKV_GGUF_TYPE_U8 = 0, OKV_GGUF_TYPE_I8 = 1, OKV_GGUF_TYPE_U16 = 2, OKV_GGUF_TYPE_I16 = 3,
    OKV_GGUF_TYPE_U32 = 4, OKV_GGUF_TYPE_I32 = 5, OKV_GGUF_TYPE_F32 = 6, OKV_GGUF_TYPE_BOOL = 7,
    OKV_GGUF_TYPE_STRING = 8, OKV_GGUF_TYPE_ARRAY = 9, OKV_GGUF_TYPE_U64 = 10,
    OKV_GGUF_TYPE_I64 = 11, OKV_GGUF_TYPE_F64 = 12,
};

typedef struct okv_gguf okv_gguf;

/* Open and validate a GGUF file. The caller owns *out and frees it with okv_gguf_close. */
enum okv_status okv_gguf_open(const char *path, okv_gguf **out);
void okv_gguf_close(okv_gguf *g);                 /* NULL is fine */
const char *okv_gguf_path(const okv_gguf *g);
uint32_t okv_gguf_version(const okv_gguf *g);

/* Metadata lookups: false when the key is absent or of an incompatible type.
 * get_int accepts every integer type (and bool); get_f32 accepts f32 and f64. */
bool okv_gguf_has(const okv_gguf *g, const char *key);
bool okv_gguf_get_int(const okv_gguf *g, const char *key, int64_t *out);
bool okv_gguf_get_f32(const okv_gguf *g, const char *key, float *out);
bool okv_gguf_get_bool(const okv_gguf *g, const char *key, bool *out);
/* A string value: pointer into the mapping (not NUL-terminated) and its length. */
bool okv_gguf_get_str(const okv_gguf *g, const char *key, const char **s, size_t *len);
/* An array: its element type and count. */
bool okv_gguf_get_arr(const okv_gguf *g, const char *key, enum okv_gguf_type *elem, uint64_t *n);
/* Element i of an array of strings / of integers / of floats (bounds checked). */
bool okv_gguf_arr_str(const okv_gguf *g, const char *key, uint64_t i, const char **s, size_t *len);
bool okv_gguf_arr_int(const okv_gguf *g, const char *key, uint64_t i, int64_t *out);
bool okv_gguf_arr_f32(const okv_gguf *g, const char *key, uint64_t i, float *out);

/* Tensors. */
int64_t okv_gguf_n_tensors(const okv_gguf *g);
/* The i-th tensor's view (name, dtype, shape, data pointer into the mapping).
 * OKV_ERR_UNSUPPORTED for ggml types other than F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the IQ formats IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ4_NL, IQ4_XS (the ternary TQ1_0 / TQ2_0 and MXFP4, for example). */
enum okv_status okv_gguf_tensor(const okv_gguf *g, int64_t i, struct okv_tensor_view *out);
/* Find a tensor by name: OKV_ERR_NOT_FOUND when absent. */
enum okv_status okv_gguf_find_tensor(const okv_gguf *g, const char *name, struct okv_tensor_view *out);

#ifdef __cplusplus
}
#endif
#endif
