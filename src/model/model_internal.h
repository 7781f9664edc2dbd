/* Internal interfaces of the model loader (src/model/): safetensors collections and
 * Hugging Face config.json parsing. Not part of the public API. */
#ifndef OASISKV_MODEL_INTERNAL_H
#define OASISKV_MODEL_INTERNAL_H

#include "oasiskv/model.h"

/* A set of safetensors files (one file, or the shards of an index) whose tensors
 * are addressed by name. Views point into read-only mappings that stay valid until
 * okv_st_close. */
struct okv_st_set;

/* Open <dir>/model.safetensors.index.json and its shards when present, else
 * <dir>/model.safetensors. Every header is parsed and every offset checked. */
enum okv_status okv_st_open_dir(const char *dir, struct okv_st_set **out);
/* Open one safetensors file as a set. */
enum okv_status okv_st_open_file(const char *path, struct okv_st_set **out);
void okv_st_close(struct okv_st_set *s);   /* NULL is fine */
int64_t okv_st_n_tensors(const struct okv_st_set *s);
/* View of a tensor by name: OKV_ERR_NOT_FOUND when absent, OKV_ERR_UNSUPPORTED for
 * dtypes other than F32, F16, BF16 and F8_E4M3 (a matrix with a scale tensor beside it,
 * which the view's scale grid points to) or ranks above 4. */
enum okv_status okv_st_find(const struct okv_st_set *s, const char *name, struct okv_tensor_view *out);
bool okv_st_has(const struct okv_st_set *s, const char *name);
/* The block of the FP8 scale grids (quantization_config.weight_block_size): a grid whose
 * shape several block sizes fit (320 columns in 3 blocks: 107 or 128) takes this one. */
void okv_st_set_fp8_block(struct okv_st_set *s, int64_t rows, int64_t cols);
/* Packed integer weights: their layout (enum okv_pack_layout), bits and group size (0 when not
 * given: taken from the tensors' shapes; a negative group: one per column), and the offset of
 * stored zero points (GPTQ v1: 1). */
void okv_st_set_pack(struct okv_st_set *s, int layout, int bits, int64_t group, int zero_offset);

/* Parse a config.json text (len bytes; path names it in messages) into cfg: fills
 * arch, sizes, rope and flags; vocab_size comes from the file. */
enum okv_status okv_hf_config_parse(const char *path, const char *text, size_t len, struct okv_model_config *cfg);
/* Read and parse <dir>/config.json. */
enum okv_status okv_hf_config_load(const char *dir, struct okv_model_config *cfg);

/* Read a whole (small) file into a NUL-terminated okv_malloc'd buffer (OKV_TAG_MODEL).
 * Files larger than max_bytes are refused with OKV_ERR_FORMAT. */
enum okv_status okv_model_read_file(const char *path, size_t max_bytes, char **out, size_t *len);

#endif
