/* A random Llama-family model built in memory (F32 views over malloc'd arrays), for
 * tests of engine mechanics that need no reference file. */
#ifndef OKV_TESTS_SYNTH_MODEL_H
#define OKV_TESTS_SYNTH_MODEL_H

#include "oasiskv/model.h"
#include "oasiskv/sampling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct synth_model {
    struct okv_model m;
    float *arena;
    size_t used, cap;
};

static inline struct okv_tensor_view synth_tensor(struct synth_model *s, struct okv_rng *rng, const char *name,
                                                  int64_t ne0, int64_t ne1, float scale, float center)
{
    struct okv_tensor_view t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = OKV_DTYPE_F32;
    t.n_dims = ne1 > 1 ? 2 : 1;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = t.ne[3] = 1;
    float *d = s->arena + s->used;
    s->used += (size_t)(ne0 * ne1);
    for (int64_t i = 0; i < ne0 * ne1; i++)
        d[i] = center + scale * (float)(2.0 * okv_rng_uniform(rng) - 1.0);
    t.data = d;
    t.nbytes = sizeof(float) * (size_t)(ne0 * ne1);
    return t;
}

/* arch: OKV_ARCH_LLAMA (no bias), QWEN2 (bias), QWEN3 (qk norm, head_dim 24). */
static inline void synth_model_init(struct synth_model *s, enum okv_arch arch, uint64_t seed)
{
    /* max_ctx 1024: long enough for sparse tests with small blocks */
    memset(s, 0, sizeof *s);
    struct okv_model_config *c = &s->m.cfg;
    c->arch = arch;
    c->n_layers = 2;
    c->dim = 64;
    c->n_heads = 4;
    c->n_kv_heads = 2;
    c->head_dim = arch == OKV_ARCH_QWEN3 ? 24 : 16;
    c->ffn_dim = 96;
    c->vocab_size = 200;
    c->max_ctx = 1024;
    c->rms_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    c->rope_pairing = arch == OKV_ARCH_LLAMA ? OKV_ROPE_PAIRING_INTERLEAVED : OKV_ROPE_PAIRING_HALF;
    c->qkv_bias = arch == OKV_ARCH_QWEN2;
    c->qk_norm = arch == OKV_ARCH_QWEN3;
    c->tied_embeddings = true;
    s->cap = 1 << 20;
    s->arena = malloc(sizeof(float) * s->cap);
    struct okv_rng rng;
    okv_rng_seed(&rng, seed);
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    s->m.tok_embd = synth_tensor(s, &rng, "tok_embd", c->dim, c->vocab_size, 1.0f, 0);
    s->m.output = s->m.tok_embd;
    s->m.output_norm = synth_tensor(s, &rng, "output_norm", c->dim, 1, 0.2f, 1.0f);
    s->m.layers = calloc((size_t)c->n_layers, sizeof *s->m.layers);
    for (int l = 0; l < c->n_layers; l++) {
        struct okv_layer_weights *w = &s->m.layers[l];
        w->attn_norm = synth_tensor(s, &rng, "attn_norm", c->dim, 1, 0.2f, 1.0f);
        w->wq = synth_tensor(s, &rng, "wq", c->dim, qd, 0.3f, 0);
        w->wk = synth_tensor(s, &rng, "wk", c->dim, kvd, 0.3f, 0);
        w->wv = synth_tensor(s, &rng, "wv", c->dim, kvd, 0.3f, 0);
        w->wo = synth_tensor(s, &rng, "wo", qd, c->dim, 0.2f, 0);
        if (c->qkv_bias) {
            w->bq = synth_tensor(s, &rng, "bq", qd, 1, 0.2f, 0);
            w->bk = synth_tensor(s, &rng, "bk", kvd, 1, 0.2f, 0);
            w->bv = synth_tensor(s, &rng, "bv", kvd, 1, 0.2f, 0);
        }
        if (c->qk_norm) {
            w->q_norm = synth_tensor(s, &rng, "q_norm", c->head_dim, 1, 0.2f, 1.0f);
            w->k_norm = synth_tensor(s, &rng, "k_norm", c->head_dim, 1, 0.2f, 1.0f);
        }
        w->ffn_norm = synth_tensor(s, &rng, "ffn_norm", c->dim, 1, 0.2f, 1.0f);
        w->w_gate = synth_tensor(s, &rng, "w_gate", c->dim, c->ffn_dim, 0.3f, 0);
        w->w_up = synth_tensor(s, &rng, "w_up", c->dim, c->ffn_dim, 0.3f, 0);
        w->w_down = synth_tensor(s, &rng, "w_down", c->ffn_dim, c->dim, 0.2f, 0);
    }
}

static inline void synth_model_free(struct synth_model *s)
{
    free(s->m.layers);
    free(s->arena);
}

#endif
