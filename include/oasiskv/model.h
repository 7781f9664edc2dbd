/* Model loading: hyper-parameters and weight views of Llama-family checkpoints
 * from a GGUF file or a Hugging Face folder (config.json + safetensors).
 *
 * Weights stay in the file's own dtype, memory-mapped; a backend converts them to
 * its working precision when it builds its copy (okv_tensor_to_f32). Tensor views
 * use GGUF's convention: ne[0] is the row length (the "in" dimension of a linear
 * layer), ne[1] the number of rows ("out"); a Hugging Face [out, in] row-major
 * weight is the same bytes. */
#ifndef OASISKV_MODEL_H
#define OASISKV_MODEL_H

#include "oasiskv/common.h"
#include "oasiskv/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct okv_gguf okv_gguf;

enum okv_arch {
    OKV_ARCH_LLAMA = 0,  /* Llama 2/3, SmolLM2 */
    OKV_ARCH_MISTRAL,
    OKV_ARCH_QWEN2,      /* q/k/v biases */
    OKV_ARCH_QWEN3,      /* RMSNorm over head_dim on q and k before RoPE */
};

/* Which elements RoPE rotates together. GGUF files of arch llama permute Q/K rows
 * so that they pair (x[2i], x[2i+1]); Hugging Face checkpoints and Qwen GGUF files
 * pair (x[i], x[i + d/2]) ("rotate half", NeoX). */
enum okv_rope_pairing {
    OKV_ROPE_PAIRING_INTERLEAVED = 0,
    OKV_ROPE_PAIRING_HALF,
};

enum okv_rope_scaling {
    OKV_ROPE_SCALING_NONE = 0,
    OKV_ROPE_SCALING_LINEAR,   /* positions divided by factor */
    OKV_ROPE_SCALING_LLAMA3,   /* per-frequency smooth scaling (Llama 3.1) */
    OKV_ROPE_SCALING_YARN,     /* YaRN (Qwen2.5 / Qwen3 past their trained context): frequencies blended between
                                  interpolated and original by a linear ramp over the dimensions, cos and sin
                                  scaled by the attention factor */
};

enum okv_model_format { OKV_MODEL_FORMAT_GGUF = 0, OKV_MODEL_FORMAT_HF };

struct okv_model_config {
    enum okv_arch arch;
    char arch_name[32];        /* as the file names it: "llama", "qwen2", ... */
    int n_layers;
    int dim;                   /* hidden size */
    int n_heads;
    int n_kv_heads;
    int head_dim;              /* may differ from dim / n_heads (Qwen3) */
    int ffn_dim;
    int vocab_size;
    int max_ctx;               /* context length the model was trained for */
    float rms_eps;
    float rope_theta;
    enum okv_rope_pairing rope_pairing;
    enum okv_rope_scaling rope_scaling;
    float rope_factor;             /* linear / llama3 */
    float rope_low_freq_factor;    /* llama3 */
    float rope_high_freq_factor;   /* llama3 */
    int rope_orig_max_ctx;         /* llama3, yarn: original_max_position_embeddings */
    float rope_beta_fast, rope_beta_slow;   /* yarn: the ramp's bounds in rotations (32, 1) */
    float rope_attn_factor;        /* yarn: cos and sin multiplied by it (0 reads as 1) */
    bool qkv_bias;
    bool qk_norm;
    bool tied_embeddings;
    int fp8_block[2];              /* FP8 checkpoints: quantization_config.weight_block_size (rows, cols), 0: none */
    int pack_bits, pack_group;     /* packed integer weights (compressed-tensors, GPTQ, AWQ): bits, group size (0: none /
                                      per channel) */
    int pack_layout;               /* enum okv_pack_layout */
    int pack_zero_offset;          /* GPTQ v1 checkpoints store zero points minus one: 1 */
};

struct okv_layer_weights {
    struct okv_tensor_view attn_norm;   /* (dim) */
    struct okv_tensor_view wq;          /* (n_heads*head_dim rows, dim) */
    struct okv_tensor_view wk;          /* (n_kv_heads*head_dim rows, dim) */
    struct okv_tensor_view wv;          /* (n_kv_heads*head_dim rows, dim) */
    struct okv_tensor_view wo;          /* (dim rows, n_heads*head_dim) */
    struct okv_tensor_view bq, bk, bv;  /* biases, data NULL unless qkv_bias */
    struct okv_tensor_view q_norm, k_norm; /* (head_dim), data NULL unless qk_norm */
    struct okv_tensor_view ffn_norm;    /* (dim) */
    struct okv_tensor_view w_gate;      /* (ffn_dim rows, dim) */
    struct okv_tensor_view w_up;        /* (ffn_dim rows, dim) */
    struct okv_tensor_view w_down;      /* (dim rows, ffn_dim) */
};

struct okv_model {
    struct okv_model_config cfg;
    enum okv_model_format format;
    char *path;                         /* the file or folder it was loaded from */
    struct okv_tensor_view tok_embd;    /* (vocab rows, dim) */
    struct okv_tensor_view output_norm; /* (dim) */
    struct okv_tensor_view output;      /* (vocab rows, dim); equals tok_embd when tied */
    struct okv_layer_weights *layers;   /* [n_layers] */
    okv_gguf *gguf;                     /* the open GGUF file, NULL for HF folders */
    void *priv;                         /* loader state: safetensors mappings */
    void *dummy;                        /* random weights of a dummy model (shared by every view) */
};

/* Load a model from a .gguf file or a Hugging Face folder. Validates shapes of every
 * tensor against the hyper-parameters. The caller owns *out (okv_model_free). */
enum okv_status okv_model_load(const char *path, struct okv_model **out);
void okv_model_free(struct okv_model *m);   /* NULL is fine */

/* A model with random weights built from a config.json alone (a file, or a folder
 * holding one), as vLLM's --load-format dummy: for timing, never for output. Every
 * tensor is a BF16 view of one shared buffer of uniform values in [-0.05, 0.05]
 * (norm weights included). The caller owns *out. */
enum okv_status okv_model_load_dummy(const char *path, uint64_t seed, struct okv_model **out);

/* Parameters of the model: every tensor present, a tied output table once. */
int64_t okv_model_n_params(const struct okv_model *m);

/* Human-readable summary (architecture, hyper-parameters, dtypes) into buf. */
void okv_model_describe(const struct okv_model *m, char *buf, size_t cap);

const char *okv_arch_name(enum okv_arch a);

#ifdef __cplusplus
}
#endif
#endif
